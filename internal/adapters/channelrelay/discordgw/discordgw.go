// Package discordgw is the server side of Discord's gateway protocol (v10, JSON encoding, no
// compression): what the platform's Discord relay speaks to the agents' gateways, and the fake
// Discord of the tests to the platform. A client connects, gets HELLO with the heartbeat
// interval, sends IDENTIFY (a new session) or RESUME (an old one from a sequence number), and
// then receives dispatches (op 0, each with its sequence number) while it heartbeats with the
// last sequence number it has seen.
//
// The protocol: https://discord.com/developers/docs/topics/gateway. Clients are
// bwmarrin/discordgo (the platform) and the engine's Discord plugin, which both send JSON text
// frames and read JSON text frames.
package discordgw

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Gateway opcodes.
const (
	OpDispatch       = 0
	OpHeartbeat      = 1
	OpIdentify       = 2
	OpResume         = 6
	OpReconnect      = 7
	OpInvalidSession = 9
	OpHello          = 10
	OpHeartbeatAck   = 11
)

// Gateway close codes.
const (
	CloseUnknownError         = 4000
	CloseDecodeError          = 4002
	CloseNotAuthenticated     = 4003
	CloseAuthenticationFailed = 4004
	CloseInvalidSeq           = 4007
	CloseSessionTimedOut      = 4009
)

// DefaultHeartbeatInterval is Discord's own.
const DefaultHeartbeatInterval = 41250 * time.Millisecond

// Payload is a gateway message.
type Payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

// Identify is the data of a client's IDENTIFY.
type Identify struct {
	Token   string `json:"token"`
	Intents int    `json:"intents"`
}

// Resume is the data of a client's RESUME.
type Resume struct {
	Token     string `json:"token"`
	SessionID string `json:"session_id"`
	Seq       int64  `json:"seq"`
}

// First is a connection's first message: exactly one is set.
type First struct {
	Identify *Identify
	Resume   *Resume
}

// Token is the token the first message carries, without the "Bot " prefix some clients
// (discordgo) send with it and Discord accepts.
func (f First) Token() string {
	var tok string
	switch {
	case f.Identify != nil:
		tok = f.Identify.Token
	case f.Resume != nil:
		tok = f.Resume.Token
	}
	return strings.TrimPrefix(tok, "Bot ")
}

// Options configure Accept.
type Options struct {
	// HeartbeatInterval is sent in HELLO (DefaultHeartbeatInterval when zero). A client that
	// sends nothing for twice the interval is gone.
	HeartbeatInterval time.Duration
}

// Conn is one client's gateway connection after its first message.
type Conn struct {
	ws       *websocket.Conn
	interval time.Duration
	wmu      sync.Mutex // one writer at a time
	once     sync.Once
	done     chan struct{}
}

var upgrader = websocket.Upgrader{
	HandshakeTimeout: 30 * time.Second,
	// gateways are no browsers: they send no Origin; a browser page must not reach one
	CheckOrigin: func(req *http.Request) bool { return req.Header.Get("Origin") == "" },
}

// readLimit bounds a client's message: Discord's clients send at most 4,096 bytes.
const readLimit = 16 << 10

// Accept upgrades req, sends HELLO and reads the client's first message, which must be
// IDENTIFY or RESUME (anything else closes the connection with the code Discord uses). On an
// error the connection is closed (or was never opened: the upgrader answered).
func Accept(w http.ResponseWriter, req *http.Request, o Options) (*Conn, First, error) {
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	ws, err := upgrader.Upgrade(w, req, nil)
	if err != nil {
		return nil, First{}, err
	}
	ws.SetReadLimit(readLimit)
	c := &Conn{ws: ws, interval: o.HeartbeatInterval, done: make(chan struct{})}
	if err := c.send(OpHello, nil, nil, map[string]int64{"heartbeat_interval": o.HeartbeatInterval.Milliseconds()}); err != nil {
		c.Close(websocket.CloseGoingAway, "")
		return nil, First{}, err
	}
	for {
		p, err := c.read()
		if err != nil {
			c.Close(CloseDecodeError, "Decode error")
			return nil, First{}, err
		}
		switch p.Op {
		case OpHeartbeat: // allowed before IDENTIFY
			if err := c.send(OpHeartbeatAck, nil, nil, nil); err != nil {
				c.Close(websocket.CloseGoingAway, "")
				return nil, First{}, err
			}
			continue
		case OpIdentify:
			var id Identify
			if json.Unmarshal(p.D, &id) != nil {
				c.Close(CloseDecodeError, "Decode error")
				return nil, First{}, errors.New("discordgw: a malformed IDENTIFY")
			}
			return c, First{Identify: &id}, nil
		case OpResume:
			var r Resume
			if json.Unmarshal(p.D, &r) != nil {
				c.Close(CloseDecodeError, "Decode error")
				return nil, First{}, errors.New("discordgw: a malformed RESUME")
			}
			return c, First{Resume: &r}, nil
		default:
			c.Close(CloseNotAuthenticated, "Not authenticated.")
			return nil, First{}, fmt.Errorf("discordgw: op %d before IDENTIFY", p.Op)
		}
	}
}

// read reads one message, within twice the heartbeat interval.
func (c *Conn) read() (Payload, error) {
	_ = c.ws.SetReadDeadline(time.Now().Add(2 * c.interval))
	_, msg, err := c.ws.ReadMessage()
	if err != nil {
		return Payload{}, err
	}
	var p Payload
	if err := json.Unmarshal(msg, &p); err != nil {
		return Payload{}, err
	}
	return p, nil
}

func (c *Conn) send(op int, seq *int64, t *string, d any) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	msg, err := json.Marshal(Payload{Op: op, D: data, S: seq, T: t})
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(c.interval))
	return c.ws.WriteMessage(websocket.TextMessage, msg)
}

// Dispatch sends event t with sequence number seq and data d (a value to marshal, or a
// json.RawMessage as it is). Safe for concurrent use.
func (c *Conn) Dispatch(t string, seq int64, d any) error {
	return c.send(OpDispatch, &seq, &t, d)
}

// InvalidSession tells the client its session is gone (resumable false: identify anew).
func (c *Conn) InvalidSession(resumable bool) error {
	return c.send(OpInvalidSession, nil, nil, resumable)
}

// Heartbeat asks the client for a heartbeat now (op 1), which it answers at once with the
// sequence number it has seen (Serve passes it on).
func (c *Conn) Heartbeat() error { return c.send(OpHeartbeat, nil, nil, nil) }

// Reconnect asks the client to reconnect and resume.
func (c *Conn) Reconnect() error { return c.send(OpReconnect, nil, nil, nil) }

// Close ends the connection with a close frame of code and reason (once; later calls do
// nothing).
func (c *Conn) Close(code int, reason string) {
	c.once.Do(func() {
		// WriteControl may run beside a data frame's write (gorilla/websocket allows it), so a
		// writer stuck on a client that does not read holds Close up for its deadline only.
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
		_ = c.ws.Close()
		close(c.done)
	})
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Serve reads the client's messages until the connection ends and returns why: it answers
// each HEARTBEAT with a HEARTBEAT_ACK and passes heartbeat the sequence number the client
// reports (nil before it has seen one); a client silent for twice the heartbeat interval is
// gone. Other messages (presence or voice state updates, member requests) are read and
// ignored. The connection is closed when Serve returns.
func (c *Conn) Serve(heartbeat func(seq *int64)) error {
	defer c.Close(websocket.CloseNormalClosure, "")
	for {
		p, err := c.read()
		if err != nil {
			return err
		}
		if p.Op != OpHeartbeat {
			continue
		}
		var seq *int64
		if len(p.D) > 0 && string(p.D) != "null" {
			var s int64
			if json.Unmarshal(p.D, &s) == nil {
				seq = &s
			}
		}
		if heartbeat != nil {
			heartbeat(seq)
		}
		if err := c.send(OpHeartbeatAck, nil, nil, nil); err != nil {
			return err
		}
	}
}
