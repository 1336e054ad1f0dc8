package agones

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// GameServer is what the sidecar reports of the GameServer (the fields the
// driver reads; names as in the REST API).
type GameServer struct {
	ObjectMeta struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"object_meta"`
	Spec struct {
		Health struct {
			Disabled      bool `json:"disabled"`
			PeriodSeconds int  `json:"period_seconds"`
		} `json:"health"`
	} `json:"spec"`
	Status struct {
		State   string `json:"state"`
		Address string `json:"address"`
		// Addresses are the node's addresses (type: ExternalIP, InternalIP,
		// Hostname, ...).
		Addresses []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"addresses"`
		// Ports are the public ports, by name (the Fleet's ports[].name).
		Ports []struct {
			Name string `json:"name"`
			Port int    `json:"port"`
		} `json:"ports"`
		Players *struct {
			Count    int64    `json:"count,string"`
			Capacity int64    `json:"capacity,string"`
			IDs      []string `json:"ids"`
		} `json:"players"`
		// Counters and Lists (beta) are by name.
		Counters map[string]Counter `json:"counters"`
		Lists    map[string]struct {
			Capacity int64    `json:"capacity,string"`
			Values   []string `json:"values"`
		} `json:"lists"`
	} `json:"status"`
}

// Counter is an Agones Counter's count and capacity.
type Counter struct {
	Count    int64 `json:"count,string"`
	Capacity int64 `json:"capacity,string"`
}

// sdk speaks the sidecar's REST API (swagger: sdk, alpha).
type sdk struct {
	base  string
	calls *http.Client // with a timeout per call
	watch *http.Client // none: the watch is a stream
}

func newSDK(cfg *Config) *sdk {
	return &sdk{base: cfg.URL, calls: cfg.Client, watch: &http.Client{Transport: cfg.Client.Transport}}
}

// maxReply bounds what the driver reads of one reply or watch line.
const maxReply = 1 << 20

// call sends body (nil: {}) as JSON and decodes the reply into out (nil:
// discarded). A status other than 200 is an error with the sidecar's
// message.
func (s *sdk) call(ctx context.Context, method, path string, body, out any) error {
	b := []byte("{}")
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.calls.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agones: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(reply))
	}
	if out != nil {
		if err := json.Unmarshal(reply, out); err != nil {
			return fmt.Errorf("agones: %s %s: %w", method, path, err)
		}
	}
	return nil
}

func (s *sdk) ready(ctx context.Context) error {
	return s.call(ctx, http.MethodPost, "/ready", nil, nil)
}
func (s *sdk) health(ctx context.Context) error {
	return s.call(ctx, http.MethodPost, "/health", nil, nil)
}
func (s *sdk) allocate(ctx context.Context) error {
	return s.call(ctx, http.MethodPost, "/allocate", nil, nil)
}
func (s *sdk) shutdown(ctx context.Context) error {
	return s.call(ctx, http.MethodPost, "/shutdown", nil, nil)
}

func (s *sdk) gameServer(ctx context.Context) (GameServer, error) {
	var gs GameServer
	err := s.call(ctx, http.MethodGet, "/gameserver", nil, &gs)
	return gs, err
}

func (s *sdk) setCapacity(ctx context.Context, n int) error {
	return s.call(ctx, http.MethodPut, "/alpha/player/capacity", map[string]string{"count": strconv.Itoa(n)}, nil)
}

// player reports a player connected (join) or disconnected.
func (s *sdk) player(ctx context.Context, id string, join bool) error {
	path := "/alpha/player/disconnect"
	if join {
		path = "/alpha/player/connect"
	}
	return s.call(ctx, http.MethodPost, path, map[string]string{"playerID": id}, nil)
}

// counter reads the counter name.
func (s *sdk) counter(ctx context.Context, name string) (Counter, error) {
	var c Counter
	err := s.call(ctx, http.MethodGet, "/v1beta1/counters/"+url.PathEscape(name), nil, &c)
	return c, err
}

// addCount changes the counter name's count by diff.
func (s *sdk) addCount(ctx context.Context, name string, diff int64) error {
	return s.call(ctx, http.MethodPatch, "/v1beta1/counters/"+url.PathEscape(name), map[string]string{"countDiff": strconv.FormatInt(diff, 10)}, nil)
}

// setCounterCapacity sets the counter name's capacity.
func (s *sdk) setCounterCapacity(ctx context.Context, name string, n int) error {
	return s.call(ctx, http.MethodPatch, "/v1beta1/counters/"+url.PathEscape(name), map[string]string{"capacity": strconv.Itoa(n)}, nil)
}

// listValue adds value to the list name, or removes it; a value already in
// (added) or not in (removed) is no error.
func (s *sdk) listValue(ctx context.Context, name, value string, add bool) error {
	verb, benign := ":removeValue", "not found"
	if add {
		verb, benign = ":addValue", "already exists"
	}
	err := s.call(ctx, http.MethodPost, "/v1beta1/lists/"+url.PathEscape(name)+verb, map[string]string{"value": value}, nil)
	if err != nil && strings.Contains(err.Error(), benign+". Value") {
		return nil
	}
	return err
}

// watchStream calls fn with every GameServer the sidecar streams (one
// {"result": GameServer} per line: the current one first, then one per
// change) until the stream ends or ctx is done.
func (s *sdk) watchStream(ctx context.Context, fn func(GameServer)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/watch/gameserver", nil)
	if err != nil {
		return err
	}
	resp, err := s.watch.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("agones: watch: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxReply)
	for sc.Scan() {
		var line struct {
			Result *GameServer `json:"result"`
			Error  any         `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("agones: watch: %w", err)
		}
		if line.Result == nil {
			return fmt.Errorf("agones: watch: %s", bytes.TrimSpace(sc.Bytes()))
		}
		fn(*line.Result)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}
