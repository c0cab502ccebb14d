// Package dnstest is an in-process authoritative DNS server on loopback for tests: TXT
// records set at run time, and switches that make it drop, refuse, fail or truncate answers,
// or go away and come back on the same port.
package dnstest

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
)

// Mode is how the server answers.
type Mode int

// Modes.
const (
	// Normal answers from its records: TXT values, NODATA, or NXDOMAIN.
	Normal Mode = iota
	// Drop reads queries and never answers (clients time out).
	Drop
	// Refuse answers REFUSED.
	Refuse
	// ServFail answers SERVFAIL.
	ServFail
	// TruncateUDP answers UDP queries with an empty truncated message, so clients must retry
	// over TCP; TCP queries are answered normally.
	TruncateUDP
)

// Server serves UDP and TCP on the same loopback port.
type Server struct {
	// Addr is `127.0.0.1:port`, stable across Stop and Start.
	Addr string

	mu      sync.Mutex
	records map[string][]string
	mode    Mode
	udp     *dns.Server
	tcp     *dns.Server
	queries atomic.Int64
	tcpSeen atomic.Int64
	byName  map[string]int64 // queries per question name (under mu)
}

// Start starts a server on a random loopback port.
func Start() (*Server, error) {
	s := &Server{records: map[string][]string{}, byName: map[string]int64{}}
	// The kernel picks a free UDP port; the same TCP port may belong to someone
	// else (another test's connection), so a few fresh picks are tried.
	var err error
	for range 20 {
		if err = s.listen("127.0.0.1:0"); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// listen binds UDP on addr and TCP on the port UDP got.
func (s *Server) listen(addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		_ = pc.Close()
		return err
	}
	h := dns.HandlerFunc(s.serve)
	udpStarted, tcpStarted := make(chan struct{}), make(chan struct{})
	u := &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: func() { close(udpStarted) }}
	t := &dns.Server{Listener: l, Handler: h, NotifyStartedFunc: func() { close(tcpStarted) }}
	go func() { _ = u.ActivateAndServe() }()
	go func() { _ = t.ActivateAndServe() }()
	<-udpStarted
	<-tcpStarted
	s.mu.Lock()
	s.Addr, s.udp, s.tcp = pc.LocalAddr().String(), u, t
	s.mu.Unlock()
	return nil
}

// Stop closes both listeners; queries then fail (connection refused on loopback).
func (s *Server) Stop() {
	s.mu.Lock()
	u, t := s.udp, s.tcp
	s.udp, s.tcp = nil, nil
	s.mu.Unlock()
	if u != nil {
		_ = u.Shutdown()
	}
	if t != nil {
		_ = t.Shutdown()
	}
}

// Restart listens again on the same address after Stop.
func (s *Server) Restart() error {
	s.mu.Lock()
	addr, running := s.Addr, s.udp != nil
	s.mu.Unlock()
	if running {
		return fmt.Errorf("dnstest: server on %s is running", addr)
	}
	return s.listen(addr)
}

// SetTXT sets name's TXT values; no values makes the name exist without TXT (NODATA).
func (s *Server) SetTXT(name string, values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[key(name)] = append([]string{}, values...)
}

// Remove deletes name (NXDOMAIN).
func (s *Server) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, key(name))
}

// SetMode switches how the server answers.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = m
}

// Queries is the number of queries received.
func (s *Server) Queries() int64 { return s.queries.Load() }

// QueriesFor is the number of queries received for name (tests sharing a server count
// their own names only).
func (s *Server) QueriesFor(name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byName[key(name)]
}

// TCPQueries is the number of queries received over TCP.
func (s *Server) TCPQueries() int64 { return s.tcpSeen.Load() }

func key(name string) string { return strings.ToLower(dns.Fqdn(name)) }

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	s.queries.Add(1)
	isTCP := w.LocalAddr().Network() == "tcp"
	if isTCP {
		s.tcpSeen.Add(1)
	}
	s.mu.Lock()
	mode := s.mode
	var values []string
	exists := false
	if len(req.Question) == 1 {
		s.byName[key(req.Question[0].Name)]++
		values, exists = s.records[key(req.Question[0].Name)]
		values = append([]string{}, values...)
	}
	s.mu.Unlock()

	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	switch {
	case mode == Drop:
		return
	case mode == Refuse:
		m.Rcode = dns.RcodeRefused
	case mode == ServFail:
		m.Rcode = dns.RcodeServerFailure
	case mode == TruncateUDP && !isTCP:
		m.Truncated = true
	case len(req.Question) != 1 || !exists:
		m.Rcode = dns.RcodeNameError
	case req.Question[0].Qtype == dns.TypeTXT:
		for _, v := range values {
			m.Answer = append(m.Answer, &dns.TXT{
				Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 1},
				Txt: split(v),
			})
		}
	}
	_ = w.WriteMsg(m)
}

// split cuts v into DNS character-strings of at most 255 bytes.
func split(v string) []string {
	var out []string
	for len(v) > 255 {
		out = append(out, v[:255])
		v = v[255:]
	}
	return append(out, v)
}
