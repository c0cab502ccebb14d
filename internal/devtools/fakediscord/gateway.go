package fakediscord

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"regexp"
	"slices"
	"sync"

	"github.com/agentplane/agentplane/internal/adapters/channelrelay/discordgw"
)

// gateway serves a gateway connection: HELLO, IDENTIFY or RESUME, then the session's events in
// order while the client heartbeats.
func (s *Server) gateway(w http.ResponseWriter, r *http.Request) {
	c, first, err := discordgw.Accept(w, r, discordgw.Options{HeartbeatInterval: s.opts.HeartbeatInterval})
	if err != nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close(1001, "going away")
		return
	}
	s.wg.Add(1)
	defer s.wg.Done()
	if first.Identify != nil {
		s.calls["GATEWAY IDENTIFY"]++
	} else {
		s.calls["GATEWAY RESUME"]++
	}
	s.notify()
	if first.Token() != s.botToken { // without discordgo's "Bot " prefix, which Discord takes too
		s.refused++
		s.mu.Unlock()
		c.Close(discordgw.CloseAuthenticationFailed, "Authentication failed.")
		return
	}
	sess, next, ok := s.open(c, first)
	if !ok {
		s.mu.Unlock()
		return
	}
	old := sess.conn
	gc := &gwConn{c: c, sess: sess, next: next}
	if old != nil {
		s.conns = slices.DeleteFunc(s.conns, func(x *gwConn) bool { return x == old })
	}
	sess.conn = gc
	s.conns = append(s.conns, gc)
	s.notify()
	s.mu.Unlock()
	if old != nil {
		old.c.Close(discordgw.CloseUnknownError, "Session resumed elsewhere.")
	}

	var local sync.WaitGroup
	local.Go(func() { s.deliver(gc) })
	_ = c.Serve(nil)
	s.mu.Lock()
	s.conns = slices.DeleteFunc(s.conns, func(x *gwConn) bool { return x == gc })
	if sess.conn == gc {
		sess.conn = nil
	}
	s.notify()
	s.mu.Unlock()
	local.Wait()
}

// open starts the session an IDENTIFY asks for, or finds the one a RESUME names (false, with
// the connection closed, when there is none or its sequence number is not one of the session's),
// and the index of the first event the connection gets. s.mu is held.
func (s *Server) open(c *discordgw.Conn, first discordgw.First) (*session, int, bool) {
	if id := first.Identify; id != nil {
		s.identifies = append(s.identifies, *id)
		sess := &session{id: newSessionID(), intents: id.Intents}
		s.sessions[sess.id] = sess
		s.appendEvent(sess, "READY", map[string]any{
			"v": 10, "user": s.bot(), "guilds": []any{map[string]any{"id": s.opts.GuildID, "unavailable": true}},
			"session_id": sess.id, "session_type": "normal", "resume_gateway_url": s.wsURL,
			"application":      map[string]any{"id": s.opts.BotUserID, "flags": appFlags},
			"private_channels": []any{}, "relationships": []any{}, "presences": []any{},
			"geo_ordered_rtc_regions": []any{}, "guild_join_requests": []any{}, "user_settings": map[string]any{},
		})
		if sess.intents&IntentGuilds != 0 {
			s.appendEvent(sess, "GUILD_CREATE", s.guild(true))
		}
		return sess, 0, true
	}
	res := first.Resume
	sess := s.sessions[res.SessionID]
	switch {
	case sess == nil:
		_ = c.InvalidSession(false)
		c.Close(1000, "Invalid session.")
		return nil, 0, false
	case res.Seq < 0 || res.Seq > int64(len(sess.events)):
		c.Close(discordgw.CloseInvalidSeq, "Invalid seq.")
		return nil, 0, false
	}
	s.appendEvent(sess, "RESUMED", map[string]any{})
	return sess, int(res.Seq), true
}

// deliver sends the connection its session's events, in order, until the connection ends or
// the session moved to another connection.
func (s *Server) deliver(gc *gwConn) {
	for {
		s.mu.Lock()
		if gc.sess.conn != gc {
			s.mu.Unlock()
			return
		}
		batch := gc.sess.events[gc.next:]
		first := gc.next
		gc.next = len(gc.sess.events)
		changed := s.changed
		s.mu.Unlock()
		for i, e := range batch {
			if err := gc.c.Dispatch(e.t, int64(first+i+1), e.d); err != nil {
				gc.c.Close(discordgw.CloseUnknownError, "")
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-gc.c.Done():
			return
		}
	}
}

func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// apiVersion is the /api prefix of a REST path: /api, /api/v9 or /api/v10.
var apiVersion = regexp.MustCompile(`^/api(/v[0-9]+)?`)
