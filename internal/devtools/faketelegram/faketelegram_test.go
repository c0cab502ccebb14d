package faketelegram

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

func getUpdates(t *testing.T, s *Server, params map[string]any) (int, []int64) {
	t.Helper()
	b, _ := json.Marshal(params)
	resp, err := http.Post(s.URL+"/bot"+s.Token+"/getUpdates", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result []struct {
			UpdateID int64 `json:"update_id"`
		} `json:"result"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	var ids []int64
	for _, u := range out.Result {
		ids = append(ids, u.UpdateID)
	}
	return resp.StatusCode, ids
}

// Telegram's offset rules: a call without an offset confirms nothing; one with an offset
// confirms the updates below it and returns the rest; a newer long poll ends an older one
// with 409.
func TestOffsets(t *testing.T) {
	s := New("1:token")
	defer s.Close()
	s.SendText(7, "a")
	s.SendText(7, "b")
	if code, ids := getUpdates(t, s, map[string]any{"limit": 1}); code != 200 || len(ids) != 1 || ids[0] != 1 || s.Pending() != 2 {
		t.Fatalf("no offset: %d %v, %d pending", code, ids, s.Pending())
	}
	if _, ids := getUpdates(t, s, map[string]any{"offset": 1}); len(ids) != 2 || s.Pending() != 2 {
		t.Fatalf("offset 1: %v, %d pending", ids, s.Pending())
	}
	if _, ids := getUpdates(t, s, map[string]any{"offset": 2}); len(ids) != 1 || ids[0] != 2 || s.Pending() != 1 {
		t.Fatalf("offset 2: %v, %d pending", ids, s.Pending())
	}
	// A long poll waits for the next update; a newer one ends it with a Conflict.
	older := make(chan int)
	go func() {
		code, _ := getUpdates(t, s, map[string]any{"offset": 3, "timeout": 30})
		older <- code
	}()
	calls(t, s, 4)
	newer := make(chan []int64)
	go func() {
		_, ids := getUpdates(t, s, map[string]any{"offset": 3, "timeout": 30})
		newer <- ids
	}()
	if code := <-older; code != http.StatusConflict {
		t.Fatalf("the older poll: %d, want 409", code)
	}
	calls(t, s, 5)
	s.SendText(7, "c")
	if ids := <-newer; len(ids) != 1 || ids[0] != 3 {
		t.Fatalf("the newer poll: %v", ids)
	}
}

// calls waits until the server has recorded n calls.
func calls(t *testing.T, s *Server, n int) {
	t.Helper()
	for len(s.Calls()) < n {
		select {
		case <-t.Context().Done():
			t.Fatalf("never %d calls", n)
		case <-time.After(time.Millisecond):
		}
	}
}
