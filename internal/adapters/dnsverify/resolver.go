// Package dnsverify proves ownership of custom domains with DNS TXT records: a resolver that
// tells "not there (yet)" from "DNS is down", the per-workspace verification token, and the
// check that compares what DNS holds with the token.
package dnsverify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Lookup outcomes a Resolver reports besides records.
var (
	// ErrNotFound: the name does not exist (NXDOMAIN) or has no TXT record (NODATA). The
	// record is simply not there yet.
	ErrNotFound = errors.New("no TXT record")
	// ErrUnavailable: no nameserver gave an answer (timeout, refused, SERVFAIL). Nothing is
	// known about the record.
	ErrUnavailable = errors.New("DNS unavailable")
)

// Resolver looks up TXT records.
type Resolver interface {
	// LookupTXT returns the TXT values of name (each record's strings joined), ErrNotFound
	// or an error wrapping ErrUnavailable.
	LookupTXT(ctx context.Context, name string) ([]string, error)
}

// Defaults of Client.
const (
	// DefaultTimeout bounds one query to one nameserver.
	DefaultTimeout = 2 * time.Second
	// ResolvConf is where the system's nameservers are read from.
	ResolvConf = "/etc/resolv.conf"
	// NameserversEnv, when set, lists nameservers (`host:port`, comma separated) that
	// replace /etc/resolv.conf's (local development and test setups).
	NameserversEnv = "AGENTPLANE_DNS_NAMESERVERS"
)

// Client is a Resolver speaking DNS to a list of recursive nameservers with
// github.com/miekg/dns: UDP first, TCP when the answer is truncated, each nameserver in turn
// until one answers.
type Client struct {
	// Nameservers are `host:port` addresses, asked in order.
	Nameservers []string
	// Timeout bounds one query to one nameserver.
	Timeout time.Duration
}

// New returns a Client for nameservers. An empty list means $AGENTPLANE_DNS_NAMESERVERS
// when set, else the nameservers of /etc/resolv.conf (127.0.0.1:53 when it names none or
// cannot be read, as the C resolver does). timeout <= 0 means DefaultTimeout.
func New(nameservers []string, timeout time.Duration) *Client {
	if len(nameservers) == 0 {
		nameservers = SystemNameservers()
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{Nameservers: nameservers, Timeout: timeout}
}

// SystemNameservers returns $AGENTPLANE_DNS_NAMESERVERS when set, else the nameservers of
// /etc/resolv.conf as `host:port`.
func SystemNameservers() []string {
	if env := strings.TrimSpace(os.Getenv(NameserversEnv)); env != "" {
		var out []string
		for _, s := range strings.Split(env, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	conf, err := dns.ClientConfigFromFile(ResolvConf)
	if err != nil || len(conf.Servers) == 0 {
		return []string{"127.0.0.1:53"}
	}
	out := make([]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		out = append(out, net.JoinHostPort(s, conf.Port))
	}
	return out
}

// LookupTXT asks each nameserver in turn for name's TXT records. The first definite answer
// (records, NXDOMAIN or NODATA) wins; when no nameserver gives one the error wraps
// ErrUnavailable and names the last failure.
func (c *Client) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if len(c.Nameservers) == 0 {
		return nil, fmt.Errorf("%w: no nameservers configured", ErrUnavailable)
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeTXT)
	q.RecursionDesired = true
	q.SetEdns0(4096, false)
	var last error
	for _, ns := range c.Nameservers {
		resp, err := c.exchange(ctx, q, ns)
		if err != nil {
			last = fmt.Errorf("%s: %w", ns, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		switch resp.Rcode {
		case dns.RcodeSuccess:
			values := txtValues(resp, q.Question[0].Name)
			if len(values) == 0 {
				return nil, ErrNotFound
			}
			return values, nil
		case dns.RcodeNameError:
			return nil, ErrNotFound
		default:
			last = fmt.Errorf("%s: answered %s", ns, dns.RcodeToString[resp.Rcode])
		}
	}
	return nil, fmt.Errorf("%w: %v", ErrUnavailable, last)
}

// exchange sends q to one nameserver over UDP and again over TCP when the answer is
// truncated, each attempt bounded by the per-query timeout.
func (c *Client) exchange(ctx context.Context, q *dns.Msg, ns string) (*dns.Msg, error) {
	resp, err := c.exchangeOver(ctx, "udp", q, ns)
	if err == nil && resp.Truncated {
		resp, err = c.exchangeOver(ctx, "tcp", q, ns)
	}
	return resp, err
}

func (c *Client) exchangeOver(ctx context.Context, network string, q *dns.Msg, ns string) (*dns.Msg, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl := &dns.Client{Net: network, Timeout: timeout, UDPSize: 4096}
	resp, _, err := cl.ExchangeContext(ctx, q.Copy(), ns)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// txtValues returns the TXT values for qname in resp, following a CNAME chain in the answer
// section. The strings of one record are joined, as long values are split into 255-byte
// strings by DNS providers.
func txtValues(resp *dns.Msg, qname string) []string {
	names := map[string]bool{strings.ToLower(qname): true}
	// Follow CNAMEs (a chain is at most as long as the answer section).
	for range resp.Answer {
		grew := false
		for _, rr := range resp.Answer {
			if cn, ok := rr.(*dns.CNAME); ok && names[strings.ToLower(cn.Hdr.Name)] && !names[strings.ToLower(cn.Target)] {
				names[strings.ToLower(cn.Target)] = true
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	var out []string
	for _, rr := range resp.Answer {
		if txt, ok := rr.(*dns.TXT); ok && names[strings.ToLower(txt.Hdr.Name)] {
			out = append(out, strings.Join(txt.Txt, ""))
		}
	}
	return out
}
