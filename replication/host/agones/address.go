package agones

import (
	"context"
	"fmt"

	"github.com/archenet/archenet/replication/host/token"
)

// Address is where players reach the game server, as Agones reports it
// (GameServer status): what a matchmaker reads from an allocation, and
// what the server's connect-token verifier must name alike.
type Address struct {
	// Host is the GameServer's address (status.address): the node's
	// external IP or name.
	Host string
	// Addresses are the node's other addresses (status.addresses), e.g.
	// an InternalIP beside the ExternalIP.
	Addresses []string
	// Ports are the public ports by name (status.ports: the Fleet's
	// ports[].name, "default" unless named).
	Ports map[string]int
}

// Address returns the GameServer's public address and ports. Before the
// pod is placed on a node (state Scheduled in a cluster) they may be
// empty: an error says so.
func (d *Driver) Address(ctx context.Context) (Address, error) {
	gs, err := d.api.gameServer(ctx)
	if err != nil {
		return Address{}, err
	}
	return addressOf(gs)
}

func addressOf(gs GameServer) (Address, error) {
	a := Address{Host: gs.Status.Address, Ports: map[string]int{}}
	for _, x := range gs.Status.Addresses {
		if x.Address != "" && x.Address != a.Host {
			a.Addresses = append(a.Addresses, x.Address)
		}
	}
	for _, p := range gs.Status.Ports {
		a.Ports[p.Name] = p.Port
	}
	if a.Host == "" || len(a.Ports) == 0 {
		return a, fmt.Errorf("agones: the GameServer has no address or ports yet (state %q)", gs.Status.State)
	}
	return a, nil
}

// Endpoint returns the server's address on port name ("": "default", or
// the only port) as connect tokens name it: [token.ServerAddress] of Host
// and the port, the string for the server's token.VerifierConfig.Addresses
// and for the Claims.Servers a matchmaker mints (from the allocation's
// address and port, with the same function).
func (a Address) Endpoint(name string) (string, error) {
	port, ok := a.Ports[name]
	if name == "" {
		if port, ok = a.Ports["default"]; !ok && len(a.Ports) == 1 {
			for _, p := range a.Ports {
				port, ok = p, true
			}
		}
	}
	if !ok || a.Host == "" {
		return "", fmt.Errorf("agones: no port %q (the GameServer has %v) or no address %q", name, a.Ports, a.Host)
	}
	return token.ServerAddress(a.Host, port), nil
}
