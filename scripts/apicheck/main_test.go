package main

import (
	"strings"
	"testing"
)

func TestKeyOf(t *testing.T) {
	for line, want := range map[string]string{
		"- ./input.Codec: removed":                                                 "input.Codec",
		"- ./replication/schema.WriteLane: removed":                                "schema.WriteLane",
		"- ./replication.(*Client).Receiver: removed":                              "replication.(*Client).Receiver",
		"- ./replication/bitio.(*Writer).WriteZigZag: removed":                     "bitio.(*Writer).WriteZigZag",
		"- ./replication.ClientInfo.TransportRTT: removed":                         "replication.ClientInfo.TransportRTT",
		"- ./replication.ProtocolVersion: value changed from 2 to 7":               "replication.ProtocolVersion",
		"- ./transport.Reject: old is comparable, new is not":                      "transport.Reject",
		"- package github.com/archenet/archenet/replication/quant: removed":        "replication/quant",
		"- ./pkg.T.M, method set of *U: removed":                                   "pkg.T.M",
		"- Version: removed":                                                       "archenet.Version",
		"- ./transport/sim.(*Conn).SetConditions: changed from func(A) to func(A)": "sim.(*Conn).SetConditions",
	} {
		if got, ok := keyOf(line); !ok || got != want {
			t.Errorf("keyOf(%q) = %q, %v; want %q", line, got, ok, want)
		}
	}
	for _, line := range []string{
		"- ./examples/arena.Avatar: removed",
		"- ./examples/loadtest.Report.PosErrMeanM: removed",
		"- package github.com/archenet/archenet/tests/internal/pagegame: removed",
		"- ./scripts/benchmd.X: removed",
	} {
		if key, ok := keyOf(line); ok {
			t.Errorf("keyOf(%q) = %q: examples, scripts and tests are not API", line, key)
		}
	}
}

func TestSection(t *testing.T) {
	doc := "# Changelog\n\n## [Unreleased]\n\n### Breaking\n- `a.B` → c\n\n## [v0.1.0] - 2026-12-02\n- `x.Y`\n"
	s := section(doc, "## [Unreleased]")
	if want := "\n\n### Breaking\n- `a.B` → c\n"; s != want {
		t.Fatalf("section = %q, want %q", s, want)
	}
	if section(doc, "## [v9]") != "" {
		t.Fatal("a missing heading has no section")
	}
}

func TestSince(t *testing.T) {
	doc := "# Changelog\n\n## [Unreleased]\n- `n.New`\n\n## [v0.2.0] - 2026-12-06\n- `a.B` → c\n\n## [v0.1.0] - 2026-12-02\n- `x.Y`\n"
	s := since(doc, "v0.1.0")
	for _, want := range []string{"`n.New`", "`a.B`"} {
		if !strings.Contains(s, want) {
			t.Errorf("since v0.1.0 lacks %s: %q", want, s)
		}
	}
	if strings.Contains(s, "`x.Y`") {
		t.Errorf("since v0.1.0 holds v0.1.0's own: %q", s)
	}
	if s := since(doc, "v0.2.0"); strings.Contains(s, "`a.B`") || !strings.Contains(s, "`n.New`") {
		t.Errorf("since v0.2.0 = %q, want the Unreleased section only", s)
	}
	if s := since(doc, "v9.9.9"); s != section(doc, "## [Unreleased]") {
		t.Errorf("since a release without a section = %q, want the Unreleased section", s)
	}
}

func TestRecordedRelease(t *testing.T) {
	doc := "# Changelog\n\n## [Unreleased]\nReleased as commit `0000000`.\n\n## [v0.3.0] - 2026-12-07\nno commit yet\n\n## [v0.2.0] - 2026-12-06\n\nReleased as commit `e373c71`.\n\n## [v0.1.0] - 2026-12-02\nReleased as commit `896be95`.\n"
	if v, c := recordedRelease(doc); v != "v0.2.0" || c != "e373c71" {
		t.Fatalf("recordedRelease = %q %q, want v0.2.0 e373c71 (the newest release that records its commit)", v, c)
	}
	if v, _ := recordedRelease("## [v0.1.0]\nReleased as commit `not-hex`.\n"); v != "" {
		t.Fatalf("a commit that is no hash was taken: %q", v)
	}
	if v, _ := recordedRelease("# Changelog\n\n## [v0.1.0]\n"); v != "" {
		t.Fatalf("a release without its commit was taken: %q", v)
	}
}
