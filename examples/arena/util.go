package main

import (
	"reflect"

	"github.com/mlange-42/arche/ecs"
)

// sysFunc adapts a function to archenet's ecs.System.
type sysFunc func(w *ecs.World)

func (f sysFunc) Initialize(*ecs.World) {}
func (f sysFunc) Update(w *ecs.World)   { f(w) }
func (f sysFunc) Finalize(*ecs.World)   {}
func typeOf[T any]() reflect.Type       { return reflect.TypeFor[T]() }
