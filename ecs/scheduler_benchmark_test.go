package ecs_test

import (
	"testing"
	"time"

	arche "github.com/mlange-42/arche/ecs"

	"github.com/archenet/archenet/ecs"
)

type nopSystem struct{ n int }

func (s *nopSystem) Initialize(*arche.World) {}
func (s *nopSystem) Update(*arche.World)     { s.n++ }
func (s *nopSystem) Finalize(*arche.World)   {}

func BenchmarkStep(b *testing.B) {
	w := arche.NewWorld()
	s, err := ecs.New(&w, ecs.Config{TickRate: 60, NetDivisor: 3})
	if err != nil {
		b.Fatal(err)
	}
	for range 10 {
		s.AddSystem(&nopSystem{})
	}
	s.AddNetSystem(&nopSystem{})
	b.ReportAllocs()
	for b.Loop() {
		s.Step()
	}
}

func BenchmarkAdvanceFrame(b *testing.B) {
	w := arche.NewWorld()
	s, err := ecs.New(&w, ecs.Config{TickRate: 60})
	if err != nil {
		b.Fatal(err)
	}
	s.AddSystem(&nopSystem{})
	b.ReportAllocs()
	for b.Loop() {
		s.Advance(time.Second / 144) // a 144 Hz display
	}
}
