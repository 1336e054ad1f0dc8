// Package entity holds the tables replication's parts share about
// entities: an entity's identity and layout ([Meta]), a table of entities
// with their quantized lanes ([Entries], what a frame of the server's ring
// and a client's decoded view both are), and sets of entity slots
// ([Bitset]).
//
// An entity is named on the wire by its slot (the index of its net handle,
// below [MaxSlots]); its Meta says which incarnation of the slot it is
// (Gen), which client owns it and which registered components it has.
package entity
