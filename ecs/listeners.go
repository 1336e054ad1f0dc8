package ecs

import (
	arche "github.com/mlange-42/arche/ecs"
	"github.com/mlange-42/arche/ecs/event"
	"github.com/mlange-42/arche/listener"
)

// ListenerID identifies a listener added with [Listeners.Add]; pass it to
// [Listeners.Remove]. IDs are never reused within one [Listeners].
type ListenerID uint64

// Listeners is an arche listener that fans events out to any number of
// sub-listeners, each filtered by its own Subscriptions and Components
// exactly as arche filters a world's single listener.
//
// An arche v0.15.3 world holds exactly one listener and has no way to read
// it back, so whoever calls World.SetListener last silently wins. The rule in
// archenet: never call World.SetListener yourself; add every listener —
// archenet's and your own — with [AddListener] (or to the [Listeners]
// returned by [InstallListeners]). Then the order of installation does not
// matter. A listener set with World.SetListener before [InstallListeners]
// runs is replaced; one set after it replaces archenet's.
//
// The subscriptions and component mask Listeners reports to the world are the
// union of its sub-listeners'; a sub-listener with nil Components (all
// components) makes the union nil. Sub-listeners must not change their
// subscriptions or components after being added.
//
// Listeners is not safe for concurrent use. Adding or removing a listener
// from inside Notify is allowed and takes effect from the next event.
type Listeners struct {
	ids      []ListenerID
	subs     []arche.Listener
	dispatch listener.Dispatch
	next     ListenerID
}

// InstallListeners returns w's [Listeners], creating it, storing it as a
// world resource and installing it with World.SetListener on first use.
// It allocates on first use only.
func InstallListeners(w *arche.World) *Listeners {
	id := arche.ResourceID[Listeners](w)
	if w.Resources().Has(id) {
		return w.Resources().Get(id).(*Listeners)
	}
	l := &Listeners{dispatch: listener.NewDispatch()}
	w.Resources().Add(id, l)
	w.SetListener(l)
	return l
}

// AddListener adds l to w's [Listeners], installing it if needed, and
// returns the ID that removes it. It is the only way archenet and user code
// should listen to a world. See [Listeners] for the rule.
func AddListener(w *arche.World, l arche.Listener) ListenerID {
	return InstallListeners(w).Add(l)
}

// RemoveListener removes the listener id from w's [Listeners] and reports
// whether it was there.
func RemoveListener(w *arche.World, id ListenerID) bool {
	rid := arche.ResourceID[Listeners](w)
	return w.Resources().Has(rid) && w.Resources().Get(rid).(*Listeners).Remove(id)
}

// Add adds a sub-listener and returns its ID. O(n) in the number of
// sub-listeners; allocates.
func (ls *Listeners) Add(l arche.Listener) ListenerID {
	ls.next++
	ls.ids = append(ls.ids[:len(ls.ids):len(ls.ids)], ls.next)
	ls.subs = append(ls.subs[:len(ls.subs):len(ls.subs)], l)
	ls.rebuild()
	return ls.next
}

// Remove removes the sub-listener id and reports whether it was there.
// O(n); allocates.
func (ls *Listeners) Remove(id ListenerID) bool {
	for i, x := range ls.ids {
		if x != id {
			continue
		}
		// Build new slices: a Notify in progress keeps iterating the old one.
		ls.ids = append(append([]ListenerID(nil), ls.ids[:i]...), ls.ids[i+1:]...)
		ls.subs = append(append([]arche.Listener(nil), ls.subs[:i]...), ls.subs[i+1:]...)
		ls.rebuild()
		return true
	}
	return false
}

// Len returns the number of sub-listeners.
func (ls *Listeners) Len() int { return len(ls.subs) }

func (ls *Listeners) rebuild() {
	ls.dispatch = listener.NewDispatch(ls.subs...)
}

// Notify passes evt to every sub-listener subscribed to it, in order of
// addition. It implements arche's Listener.
func (ls *Listeners) Notify(w *arche.World, evt arche.EntityEvent) {
	d := ls.dispatch // a copy: Add/Remove during Notify replace ls.dispatch
	d.Notify(w, evt)
}

// Subscriptions returns the union of the sub-listeners' subscriptions.
func (ls *Listeners) Subscriptions() event.Subscription { return ls.dispatch.Subscriptions() }

// Components returns the union of the sub-listeners' component masks, or nil
// if any of them listens to all components (or there are none).
func (ls *Listeners) Components() *arche.Mask {
	if len(ls.subs) == 0 {
		return nil
	}
	return ls.dispatch.Components()
}
