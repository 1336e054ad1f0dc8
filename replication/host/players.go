package host

import "strconv"

// trackPlayers compares the server's seats with the players the match
// knows (by client id and seat, so a slot reused within one frame is a
// leave and a join, and a seat suspended or resumed on a new connection is
// the same player) and reports the difference to Config.OnPlayer. A connect
// token is spent once its player acknowledged its first snapshot; the token
// of a connection that did not get so far is given back
// (token.Verifier.Release). It returns the number of seats.
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
		ci, ok := m.srv.Client(id)
		if !ok || ci.Seat != p.seat {
			delete(m.players, id)
			m.h.releaseToken(p.token) // (nil once spent)
			events = append(events, PlayerEvent{Match: m.name, Player: p.info})
			continue
		}
		if c := m.srv.Conn(id); p.token != nil && ci.NewestAck != 0 || c != p.conn {
			if ci.NewestAck != 0 {
				p.token = nil // joined: the token is spent
			}
			p.conn = c // (a resume's, or none while suspended)
			m.players[id] = p
		}
	}
	ids := append(m.srv.Clients(), m.srv.Suspended()...)
	for _, id := range ids {
		ci, _ := m.srv.Client(id)
		if p, ok := m.players[id]; ok && p.seat == ci.Seat {
			continue
		}
		c := m.srv.Conn(id) // (a new seat: its first connection)
		info := Player{Client: id, ID: m.name + "/" + strconv.Itoa(int(id))}
		r := m.routed[c]
		if r.claims != nil {
			info.Token = r.claims
			info.ID = strconv.FormatUint(r.claims.ClientID, 10)
		}
		delete(m.routed, c)
		m.players[id] = player{seat: ci.Seat, conn: c, info: info, token: r.token}
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
