package host

import "strconv"

// trackPlayers compares the server's clients with the players the match
// knows (by client id and connection, so a slot reused within one frame is
// a leave and a join) and reports the difference to Config.OnPlayer. A
// connect token is spent once its player acknowledged its first snapshot;
// the token of a connection that did not get so far is given back
// (token.Verifier.Release). It returns the number of clients.
func (m *Match) trackPlayers() int {
	m.emitMu.Lock()
	defer m.emitMu.Unlock()
	m.pmu.Lock()
	if m.abandoned {
		m.pmu.Unlock()
		return 0
	}
	events := m.events[:0]
	for id, p := range m.players {
		if m.srv.Conn(id) != p.conn {
			delete(m.players, id)
			m.h.releaseToken(p.token) // (nil once spent)
			events = append(events, PlayerEvent{Match: m.name, Player: p.info})
			continue
		}
		if p.token != nil {
			if ci, ok := m.srv.Client(id); ok && ci.NewestAck != 0 {
				p.token = nil // joined: the token is spent
				m.players[id] = p
			}
		}
	}
	ids := m.srv.Clients()
	for _, id := range ids {
		c := m.srv.Conn(id)
		if p, ok := m.players[id]; ok && p.conn == c {
			continue
		}
		info := Player{Client: id, ID: m.name + "/" + strconv.Itoa(int(id))}
		r := m.routed[c]
		if r.claims != nil {
			info.Token = r.claims
			info.ID = strconv.FormatUint(r.claims.ClientID, 10)
		}
		delete(m.routed, c)
		m.players[id] = player{conn: c, info: info, token: r.token}
		events = append(events, PlayerEvent{Match: m.name, Player: info, Joined: true})
	}
	m.pmu.Unlock()
	// Routed connections that never joined (refused by the server, or gone
	// before their Welcome: a join that timed out) give their token back.
	for c, r := range m.routed {
		select {
		case <-c.Done():
			delete(m.routed, c)
			m.h.releaseToken(r.token)
		default:
		}
	}
	if fn := m.h.cfg.OnPlayer; fn != nil {
		for _, e := range events {
			fn(e)
		}
	}
	clear(events)
	m.events = events[:0]
	return len(ids)
}

func (m *Match) emit(p Player, joined bool) {
	if fn := m.h.cfg.OnPlayer; fn != nil {
		fn(PlayerEvent{Match: m.name, Player: p, Joined: joined})
	}
}
