package agones_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/archenet/archenet/replication/host"
	"github.com/archenet/archenet/replication/host/agones"
	"github.com/archenet/archenet/replication/host/agones/agonestest"
)

// The manifests in examples/agones, decoded strictly (an unknown field is
// an error) into the fields of Agones's API types as of 1.56
// (pkg/apis/agones/v1 GameServerSpec, Fleet; pkg/apis/autoscaling/v1
// FleetAutoscaler; pkg/apis/allocation/v1 GameServerAllocation), with
// their enums and the bounds Agones validates.

type objectMeta struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type gameServerSpec struct {
	Ports []struct {
		Name          string `json:"name"`
		PortPolicy    string `json:"portPolicy"`
		ContainerPort int    `json:"containerPort"`
		Protocol      string `json:"protocol"`
	} `json:"ports"`
	Health struct {
		Disabled            bool `json:"disabled"`
		InitialDelaySeconds int  `json:"initialDelaySeconds"`
		PeriodSeconds       int  `json:"periodSeconds"`
		FailureThreshold    int  `json:"failureThreshold"`
	} `json:"health"`
	Counters map[string]struct {
		Count    *int64 `json:"count"`
		Capacity *int64 `json:"capacity"`
	} `json:"counters"`
	Lists map[string]struct {
		Capacity *int64   `json:"capacity"`
		Values   []string `json:"values"`
	} `json:"lists"`
	Template json.RawMessage `json:"template"` // a Pod template: Kubernetes's own
}

type fleet struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Replicas   int    `json:"replicas"`
		Scheduling string `json:"scheduling"`
		Template   struct {
			Metadata objectMeta     `json:"metadata"`
			Spec     gameServerSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type fleetAutoscaler struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		FleetName string `json:"fleetName"`
		Policy    struct {
			Type    string `json:"type"`
			Counter *struct {
				Key         string          `json:"key"`
				BufferSize  json.RawMessage `json:"bufferSize"` // int or "N%"
				MinCapacity int64           `json:"minCapacity"`
				MaxCapacity int64           `json:"maxCapacity"`
			} `json:"counter"`
		} `json:"policy"`
		Sync struct {
			Type          string `json:"type"`
			FixedInterval struct {
				Seconds int `json:"seconds"`
			} `json:"fixedInterval"`
		} `json:"sync"`
	} `json:"spec"`
}

type gameServerAllocation struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Scheduling string `json:"scheduling"`
		Priorities []struct {
			Type  string `json:"type"`
			Key   string `json:"key"`
			Order string `json:"order"`
		} `json:"priorities"`
		Selectors []struct {
			MatchLabels     map[string]string `json:"matchLabels"`
			GameServerState string            `json:"gameServerState"`
			Counters        map[string]struct {
				MinCount     int64 `json:"minCount"`
				MaxCount     int64 `json:"maxCount"`
				MinAvailable int64 `json:"minAvailable"`
				MaxAvailable int64 `json:"maxAvailable"`
			} `json:"counters"`
		} `json:"selectors"`
		Counters map[string]struct {
			Action string `json:"action"`
			Amount int64  `json:"amount"`
		} `json:"counters"`
		Metadata objectMeta `json:"metadata"`
	} `json:"spec"`
}

func strict(t *testing.T, name string, v any) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "agones", name))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), name)
	return b
}

func oneOf(t *testing.T, what, v string, allowed ...string) {
	t.Helper()
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	t.Fatalf("%s %q: want one of %q", what, v, allowed)
}

// TestManifests: the Fleet, FleetAutoscaler and GameServerAllocation of
// examples/agones agree with Agones's types and with each other (the rooms
// counter, the players list, the fleet's name), and the Fleet's GameServer
// template runs under the real sidecar (-f): the driver finds its rooms
// counter and players list, and the port connect tokens name.
func TestManifests(t *testing.T) {
	var f fleet
	strict(t, "fleet.json", &f)
	require.Equal(t, "agones.dev/v1", f.APIVersion)
	require.Equal(t, "Fleet", f.Kind)
	oneOf(t, "fleet scheduling", f.Spec.Scheduling, "Packed", "Distributed")
	gs := f.Spec.Template.Spec
	require.NotEmpty(t, gs.Ports)
	for _, p := range gs.Ports {
		oneOf(t, "port policy", p.PortPolicy, "Dynamic", "Static", "Passthrough")
		oneOf(t, "protocol", p.Protocol, "UDP", "TCP", "TCPUDP")
	}
	rooms, ok := gs.Counters[agones.DefaultRooms]
	require.True(t, ok, "a rooms counter")
	require.NotNil(t, rooms.Capacity, "its capacity (an entry with neither count nor capacity is dropped by the CRD)")
	players, ok := gs.Lists[agones.DefaultPlayers]
	require.True(t, ok, "a players list")
	require.NotNil(t, players.Capacity)
	require.LessOrEqual(t, *players.Capacity, int64(1000), "Agones lists hold at most 1000 values")
	var pod struct {
		Spec struct {
			TerminationGracePeriodSeconds int `json:"terminationGracePeriodSeconds"`
			Containers                    []struct {
				Args []string `json:"args"`
			} `json:"containers"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal(gs.Template, &pod))
	require.Len(t, pod.Spec.Containers, 1)
	args := strings.Join(pod.Spec.Containers[0].Args, " ")
	require.Contains(t, args, "-agones")
	drain, err := time.ParseDuration(pod.Spec.Containers[0].Args[len(pod.Spec.Containers[0].Args)-1])
	require.NoError(t, err, "the last argument is -drain's")
	require.Greater(t, time.Duration(pod.Spec.TerminationGracePeriodSeconds)*time.Second, drain, "the pod outlives the drain")

	var fa fleetAutoscaler
	strict(t, "fleetautoscaler.json", &fa)
	require.Equal(t, "autoscaling.agones.dev/v1", fa.APIVersion)
	require.Equal(t, "FleetAutoscaler", fa.Kind)
	require.Equal(t, f.Metadata.Name, fa.Spec.FleetName)
	require.Equal(t, "Counter", fa.Spec.Policy.Type)
	c := fa.Spec.Policy.Counter
	require.NotNil(t, c)
	require.Equal(t, agones.DefaultRooms, c.Key)
	var buffer int64
	require.NoError(t, json.Unmarshal(c.BufferSize, &buffer), "an integer buffer")
	require.Positive(t, buffer)
	require.LessOrEqual(t, buffer, c.MaxCapacity)
	require.True(t, c.MinCapacity == 0 || c.MinCapacity >= buffer, "minCapacity 0 or at least bufferSize")
	require.LessOrEqual(t, c.MinCapacity, c.MaxCapacity)
	require.Zero(t, c.MaxCapacity%*rooms.Capacity, "maxCapacity a whole number of pods")
	require.Equal(t, "FixedInterval", fa.Spec.Sync.Type)
	require.Positive(t, fa.Spec.Sync.FixedInterval.Seconds)

	var ga gameServerAllocation
	strict(t, "allocation.json", &ga)
	require.Equal(t, "allocation.agones.dev/v1", ga.APIVersion)
	require.Equal(t, "GameServerAllocation", ga.Kind)
	oneOf(t, "allocation scheduling", ga.Spec.Scheduling, "Packed", "Distributed")
	for _, p := range ga.Spec.Priorities {
		oneOf(t, "priority type", p.Type, "Counter", "List")
		oneOf(t, "priority order", p.Order, "Ascending", "Descending")
		require.Equal(t, agones.DefaultRooms, p.Key)
	}
	require.Len(t, ga.Spec.Selectors, 2)
	for i, want := range []string{"Allocated", "Ready"} { // a pod with room first, then a fresh one
		s := ga.Spec.Selectors[i]
		require.Equal(t, want, s.GameServerState)
		require.Equal(t, f.Metadata.Name, s.MatchLabels["agones.dev/fleet"])
		require.EqualValues(t, 1, s.Counters[agones.DefaultRooms].MinAvailable)
	}
	inc := ga.Spec.Counters[agones.DefaultRooms]
	require.Equal(t, "Increment", inc.Action)
	require.EqualValues(t, 1, inc.Amount)
	require.NotEmpty(t, ga.Spec.Metadata.Labels[agones.DefaultMatchKey], "the match named for the driver")

	// The Fleet's GameServer, as Agones makes it from the template and
	// places it (the sidecar's local mode reads its status from the file).
	spec, err := json.Marshal(gs)
	require.NoError(t, err)
	var counters, lists json.RawMessage
	counters, _ = json.Marshal(gs.Counters)
	lists, _ = json.Marshal(gs.Lists)
	file := `{"apiVersion":"agones.dev/v1","kind":"GameServer","metadata":{"name":"arena-x1"},"spec":` + string(spec) +
		`,"status":{"state":"Scheduled","address":"198.51.100.7","ports":[{"name":"default","port":7654}],"counters":` +
		string(counters) + `,"lists":` + string(lists) + `}}`
	sc := agonestest.Start(t, file)
	d, err := agones.New(agones.Config{URL: sc.URL, Logger: quiet})
	require.NoError(t, err)
	addr, err := d.Address(context.Background())
	require.NoError(t, err)
	ep, err := addr.Endpoint(gs.Ports[0].Name)
	require.NoError(t, err)
	require.Equal(t, "198.51.100.7:7654", ep)
	var hc host.Config
	d.Configure(&hc)
	h, _ := quicHost(t, hc)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx, h) }()
	until(t, "Ready, the rooms counter in use", func() bool { return d.State() == "Ready" && d.Stats().Rooms == 0 })
	cancel()
	<-ran
	var got agones.Counter
	require.NoError(t, json.Unmarshal([]byte(call(t, "GET", sc.URL+"/v1beta1/counters/rooms", "")), &got))
	require.Equal(t, *rooms.Capacity, got.Capacity)
}
