package ecs_test

import (
	"testing"

	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/ecs/event"
	"github.com/mlange-42/arche/listener"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/ecs"
)

type posC struct{ X float64 }
type velC struct{ X float64 }
type replicated struct{}

type evtLog struct {
	created, removed []arche.Entity
}

func (l *evtLog) callback(subs event.Subscription, ids ...arche.ID) *listener.Callback {
	cb := listener.NewCallback(func(_ *arche.World, e arche.EntityEvent) {
		if e.Contains(event.EntityCreated) {
			l.created = append(l.created, e.Entity)
		}
		if e.Contains(event.EntityRemoved) {
			l.removed = append(l.removed, e.Entity)
		}
	}, subs, ids...)
	return &cb
}

func TestListenersFanOutAnyOrder(t *testing.T) {
	for _, userFirst := range []bool{true, false} {
		w := arche.NewWorld()
		pos := arche.ComponentID[posC](&w)
		rep := arche.ComponentID[replicated](&w)

		var net, user evtLog
		// archenet listens to replicated entities only, for creation and removal.
		netL := net.callback(event.EntityCreated|event.EntityRemoved, rep)
		// The user listens to all entities, creation only.
		userL := user.callback(event.EntityCreated)
		if userFirst {
			ecs.AddListener(&w, userL)
			ecs.AddListener(&w, netL)
		} else {
			ecs.AddListener(&w, netL)
			ecs.AddListener(&w, userL)
		}

		a := w.NewEntity(pos)
		b := w.NewEntity(pos, rep)
		w.RemoveEntity(a)
		w.RemoveEntity(b)

		assert.Equal(t, []arche.Entity{b}, net.created, "component mask respected")
		assert.Equal(t, []arche.Entity{b}, net.removed)
		assert.Equal(t, []arche.Entity{a, b}, user.created)
		assert.Empty(t, user.removed, "subscription respected")
	}
}

func TestListenersUnionAndRemove(t *testing.T) {
	w := arche.NewWorld()
	pos := arche.ComponentID[posC](&w)
	vel := arche.ComponentID[velC](&w)
	rep := arche.ComponentID[replicated](&w)

	ls := ecs.InstallListeners(&w)
	assert.Same(t, ls, ecs.InstallListeners(&w), "one Listeners per world")
	assert.Nil(t, ls.Components())

	var l1, l2 evtLog
	id1 := ecs.AddListener(&w, l1.callback(event.EntityCreated, pos))
	id2 := ecs.AddListener(&w, l2.callback(event.EntityRemoved, rep))
	assert.Equal(t, event.EntityCreated|event.EntityRemoved, ls.Subscriptions())
	require.NotNil(t, ls.Components())
	assert.Equal(t, arche.All(pos, rep), *ls.Components())

	e1 := w.NewEntity(vel) // nobody: l1 wants pos, l2 wants removals
	e2 := w.NewEntity(pos)
	w.RemoveEntity(e1)
	assert.Equal(t, []arche.Entity{e2}, l1.created)
	assert.Empty(t, l2.removed)

	assert.True(t, ecs.RemoveListener(&w, id1))
	assert.False(t, ecs.RemoveListener(&w, id1))
	assert.Equal(t, 1, ls.Len())
	assert.Equal(t, event.EntityRemoved, ls.Subscriptions())
	w.NewEntity(pos)
	assert.Len(t, l1.created, 1, "removed listener gets nothing")

	e3 := w.NewEntity(rep)
	w.RemoveEntity(e3)
	assert.Equal(t, []arche.Entity{e3}, l2.removed)
	assert.True(t, ecs.RemoveListener(&w, id2))
	assert.Equal(t, event.Subscription(0), ls.Subscriptions())
}

func TestListenersAddDuringNotify(t *testing.T) {
	w := arche.NewWorld()
	var late evtLog
	var added bool
	cb := listener.NewCallback(func(w *arche.World, e arche.EntityEvent) {
		if !added {
			added = true
			ecs.AddListener(w, late.callback(event.EntityCreated))
		}
	}, event.EntityCreated)
	ecs.AddListener(&w, &cb)
	e1 := w.NewEntity()
	e2 := w.NewEntity()
	assert.Equal(t, []arche.Entity{e2}, late.created, "takes effect from the next event, not %v", e1)
}

func TestRemoveListenerWithoutInstall(t *testing.T) {
	w := arche.NewWorld()
	assert.False(t, ecs.RemoveListener(&w, 1))
}
