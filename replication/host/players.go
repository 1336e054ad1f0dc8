package host

import "strconv"

// trackPlayers compares the server's clients with the players the match
// knows (by client id and connection, so a slot reused within one frame is
// a leave and a join) and reports the difference to Config.OnPlayer. It
// returns the number of clients.
func (m *Match) trackPlayers() int {
	for id, p := range m.players {
		if m.srv.Conn(id) != p.conn {
			delete(m.players, id)
			m.emit(p.info, false)
		}
	}
	ids := m.srv.Clients()
	for _, id := range ids {
		c := m.srv.Conn(id)
		if p, ok := m.players[id]; ok && p.conn == c {
			continue
		}
		info := Player{Client: id, ID: m.name + "/" + strconv.Itoa(int(id))}
		if claims := m.routed[c]; claims != nil {
			info.Token = claims
			info.ID = strconv.FormatUint(claims.ClientID, 10)
		}
		delete(m.routed, c)
		m.players[id] = player{conn: c, info: info}
		m.emit(info, true)
	}
	// Routed connections that never joined (refused by the server, gone).
	for c := range m.routed {
		select {
		case <-c.Done():
			delete(m.routed, c)
		default:
		}
	}
	return len(ids)
}

func (m *Match) emit(p Player, joined bool) {
	if fn := m.h.cfg.OnPlayer; fn != nil {
		fn(PlayerEvent{Match: m.name, Player: p, Joined: joined})
	}
}
