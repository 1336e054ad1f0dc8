package mirror

import (
	"testing"

	"github.com/archenet/archenet/replication/internal/entity"
	"github.com/stretchr/testify/require"
)

// Slots a client mirrors densely (an honest server) and far ones (a hostile
// or huge one) behave the same: the table is only a representation.
func TestTable(t *testing.T) {
	tab := newTable(1024)
	require.Nil(t, tab.get(3))
	for _, slot := range []uint32{0, 3, 1023, 1024, 1 << 23, entity.MaxSlots - 1} {
		m := tab.at(slot)
		m.alive, m.gen = true, slot+1
	}
	require.LessOrEqual(t, len(tab.dense), 1024)
	require.Len(t, tab.sparse, 3)
	seen := map[uint32]uint32{}
	tab.each(func(slot uint32, m *mirror) { seen[slot] = m.gen })
	require.Equal(t, map[uint32]uint32{0: 1, 3: 4, 1023: 1024, 1024: 1025, 1 << 23: 1<<23 + 1, entity.MaxSlots - 1: entity.MaxSlots}, seen)
	require.Equal(t, uint32(1<<23+1), tab.get(1<<23).gen)
	*tab.get(1 << 23) = mirror{}
	tab.release(1 << 23)
	require.Nil(t, tab.get(1<<23))
	require.Len(t, tab.sparse, 2)
}
