// Command apicheck fails when the module's public API changed
// incompatibly since the last release without CHANGELOG.md naming the
// change: it compares the API with the newest v* tag's (golang.org/x/exp's
// apidiff, on PATH) and requires every incompatible change's identifier, in
// backticks, in the changelog's sections newer than that release: its
// "## [Unreleased]" section, and a release's section written before its tag
// exists (as
// `pkg.Name`, `pkg.(*Type).Method`, `pkg.Type.Field`, or the package's
// path for a removed package). Examples, scripts and tests are not API.
//
//	go run ./scripts/apicheck            # from the module root
//	go run ./scripts/apicheck -base v0.1.0
//
// Without a release tag in the clone (a shallow one, say, or a clone whose
// tags were not carried over) it fetches the tags; if there still is none it
// takes the newest release the changelog records with its commit (a line
// "Released as commit `e373c71`." under the release's heading), tags it in
// the clone and compares with that. With neither, it says so loudly and
// checks nothing.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const module = "github.com/archenet/archenet"

func main() {
	base := flag.String("base", "", "the release to compare with (default: the newest v* tag)")
	changelog := flag.String("changelog", "CHANGELOG.md", "the changelog")
	flag.Parse()
	if err := run(*base, *changelog); err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(1)
	}
}

func run(base, changelog string) error {
	if base == "" {
		var err error
		if base, err = lastRelease(); err != nil {
			return err
		}
		if base == "" {
			doc, err := os.ReadFile(changelog)
			if err != nil {
				return err
			}
			version, commit := recordedRelease(string(doc))
			if version == "" {
				fmt.Println("!!! API CHECK SKIPPED: no v* release tag in this clone (git fetch --tags), and no release commit in " + changelog)
				return nil
			}
			if out, err := exec.Command("git", "tag", version, commit).CombinedOutput(); err != nil {
				return fmt.Errorf("tagging %s at %s, the commit %s records: %v\n%s", version, commit, changelog, err, out)
			}
			fmt.Printf("no v* tag in this clone: tagged %s at %s, the commit %s records for it\n", version, commit, changelog)
			base = version
		}
	}
	diff, err := incompatible(base)
	if err != nil {
		return err
	}
	log, err := os.ReadFile(changelog)
	if err != nil {
		return err
	}
	unreleased := since(string(log), base)
	missing := 0
	for _, line := range diff {
		key, ok := keyOf(line)
		if !ok {
			continue
		}
		if !strings.Contains(unreleased, "`"+key+"`") {
			fmt.Printf("not named in %s since %s: `%s`   (%s)\n", changelog, base, key, line)
			missing++
		}
	}
	fmt.Printf("API since %s: %d incompatible changes (examples, scripts and tests aside: %d), %d not named\n",
		base, len(diff), countAPI(diff), missing)
	if missing > 0 {
		return fmt.Errorf("%d incompatible API changes since %s are not named in %s (name each, with a migration line, under Breaking)", missing, base, changelog)
	}
	return nil
}

// lastRelease returns the newest v* tag reachable from HEAD ("" if none,
// after fetching the tags once).
func lastRelease() (string, error) {
	describe := func() string {
		out, err := exec.Command("git", "describe", "--tags", "--abbrev=0", "--match", "v*").Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if t := describe(); t != "" {
		return t, nil
	}
	if out, _ := exec.Command("git", "rev-parse", "--is-shallow-repository").Output(); strings.TrimSpace(string(out)) == "true" {
		_ = exec.Command("git", "fetch", "--quiet", "--unshallow", "--tags").Run()
	} else {
		_ = exec.Command("git", "fetch", "--quiet", "--tags").Run()
	}
	return describe(), nil
}

// recordedRelease returns the newest release in the changelog whose
// section records its commit ("Released as commit `<hash>`."), or "".
func recordedRelease(doc string) (version, commit string) {
	const mark = "Released as commit `"
	for rest := doc; ; {
		i := strings.Index(rest, "\n## [v")
		if i < 0 {
			return "", ""
		}
		rest = rest[i+len("\n## ["):]
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", ""
		}
		body := section("## ["+rest, "## ["+rest[:end+1])
		if j := strings.Index(body, mark); j >= 0 {
			h := body[j+len(mark):]
			if k := strings.IndexByte(h, '`'); k > 0 && isHex(h[:k]) {
				return rest[:end], h[:k]
			}
		}
	}
}

func isHex(s string) bool {
	if len(s) < 7 || len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// incompatible returns apidiff's incompatible changes of the module since
// release base: base's tree is exported into a temporary directory and its
// API written there, then compared with the working tree's.
func incompatible(base string) ([]string, error) {
	dir, err := os.MkdirTemp("", "apicheck")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tree := filepath.Join(dir, "tree")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return nil, err
	}
	archive := exec.Command("git", "archive", "--format=tar", base)
	untar := exec.Command("tar", "-x", "-C", tree)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return nil, err
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		return nil, err
	}
	if err := archive.Run(); err != nil {
		return nil, fmt.Errorf("git archive %s: %w", base, err)
	}
	if err := untar.Wait(); err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", base, err)
	}
	exp := filepath.Join(dir, base+".exp")
	write := exec.Command("apidiff", "-m", "-w", exp, module)
	write.Dir = tree
	if out, err := write.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("apidiff -w in %s: %v\n%s", base, err, out)
	}
	cmp := exec.Command("apidiff", "-m", "-incompatible", exp, module)
	var stderr bytes.Buffer
	cmp.Stderr = &stderr
	out, err := cmp.Output()
	if err != nil {
		return nil, fmt.Errorf("apidiff: %v\n%s", err, stderr.Bytes())
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "- ") {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

// since returns the changelog's text newer than release base: from its
// "## [Unreleased]" heading to base's ("## [v0.1.0]"), or the Unreleased
// section alone if base has no section.
func since(doc, base string) string {
	i := strings.Index(doc, "## [Unreleased]")
	if i < 0 {
		return ""
	}
	j := strings.Index(doc[i:], "\n## ["+base+"]")
	if j < 0 {
		return section(doc, "## [Unreleased]")
	}
	return doc[i : i+j]
}

// section returns the text under heading up to the next "## " heading.
func section(doc, heading string) string {
	i := strings.Index(doc, heading)
	if i < 0 {
		return ""
	}
	rest := doc[i+len(heading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// keyOf returns the changelog key of one line of apidiff's output
// ("- ./replication/schema.(*Plan).Quantize: removed" → "schema.(*Plan).Quantize";
// "- package github.com/archenet/archenet/replication/quant: removed" →
// "replication/quant"); ok is false for lines about examples, scripts and
// tests, which are not API.
func keyOf(line string) (key string, ok bool) {
	obj := strings.TrimPrefix(line, "- ")
	if i := strings.Index(obj, ": "); i >= 0 {
		obj = obj[:i]
	}
	for _, suffix := range []string{", method set of ", ", element type"} {
		if i := strings.Index(obj, suffix); i >= 0 {
			obj = obj[:i]
		}
	}
	switch {
	case strings.HasPrefix(obj, "package "+module+"/"):
		key = strings.TrimPrefix(obj, "package "+module+"/")
		return key, !notAPI(key)
	case strings.HasPrefix(obj, "./"):
		rel := strings.TrimPrefix(obj, "./")
		if notAPI(rel) {
			return "", false
		}
		dot := strings.Index(rel, ".")
		if dot < 0 {
			return rel, true
		}
		pkg := rel[:dot]
		if slash := strings.LastIndex(pkg, "/"); slash >= 0 {
			pkg = pkg[slash+1:]
		}
		return pkg + rel[dot:], true
	}
	return "archenet." + obj, true // the root package
}

// notAPI reports whether a module-relative path is under examples, scripts
// or tests.
func notAPI(rel string) bool {
	for _, dir := range []string{"examples", "scripts", "tests"} {
		if rel == dir || strings.HasPrefix(rel, dir+"/") || strings.HasPrefix(rel, dir+".") {
			return true
		}
	}
	return false
}

// countAPI counts the lines about library packages.
func countAPI(lines []string) int {
	n := 0
	for _, l := range lines {
		if _, ok := keyOf(l); ok {
			n++
		}
	}
	return n
}
