package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ClusterDomain is the cluster's DNS domain.
const ClusterDomain = "cluster.local"

// clusterDNS is the cluster's DNS server, the small equivalent of CoreDNS's kubernetes plugin
// for one node: it answers `<service>.<namespace>.svc.cluster.local` with the Service's
// ClusterIP (a headless Service's ready endpoints), `<hostname>.<service>.<namespace>.svc...`
// with that endpoint's address (a StatefulSet's pods), and forwards every other name to the
// machine's resolver. It listens on the node's address, port 53 (UDP and TCP); the kubelet
// gives pods that address as their nameserver. Names are looked up in the API server per
// query: a test rig's queries are few.
type clusterDNS struct {
	c        client.Reader
	upstream string // host:port of the machine's resolver ("" when it has none)
	servers  []*dns.Server
	wg       sync.WaitGroup
}

// startDNS serves the cluster's names on addr:53.
func startDNS(c client.Reader, addr string) (*clusterDNS, error) {
	d := &clusterDNS{c: c}
	if conf, err := dns.ClientConfigFromFile("/etc/resolv.conf"); err == nil && len(conf.Servers) > 0 {
		d.upstream = net.JoinHostPort(conf.Servers[0], conf.Port)
	}
	listen := net.JoinHostPort(addr, "53")
	udp, err := net.ListenPacket("udp", listen)
	if err != nil {
		return nil, fmt.Errorf("cluster DNS: %w", err)
	}
	tcp, err := net.Listen("tcp", listen)
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("cluster DNS: %w", err)
	}
	d.servers = []*dns.Server{{PacketConn: udp, Handler: d}, {Listener: tcp, Handler: d}}
	for _, s := range d.servers {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			_ = s.ActivateAndServe()
		}()
	}
	return d, nil
}

// stop stops serving.
func (d *clusterDNS) stop() {
	if d == nil {
		return
	}
	for _, s := range d.servers {
		_ = s.Shutdown()
	}
	d.wg.Wait()
}

// ServeDNS implements dns.Handler.
func (d *clusterDNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	if len(req.Question) != 1 {
		m.SetRcode(req, dns.RcodeFormatError)
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if !dns.IsSubDomain(ClusterDomain+".", name) {
		_ = w.WriteMsg(d.forward(req))
		return
	}
	m.SetReply(req)
	m.Authoritative = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ips, err := d.resolve(ctx, strings.TrimSuffix(name, "."+ClusterDomain+"."))
	switch {
	case errors.Is(err, errNoName):
		m.Rcode = dns.RcodeNameError
	case err != nil:
		m.Rcode = dns.RcodeServerFailure
	case q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY:
		for _, ip := range ips {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: ip})
		}
	}
	_ = w.WriteMsg(m)
}

var errNoName = errors.New("no such name")

// resolve answers `<service>.<namespace>.svc` and `<hostname>.<service>.<namespace>.svc`.
func (d *clusterDNS) resolve(ctx context.Context, rel string) ([]net.IP, error) {
	labels := strings.Split(rel, ".")
	if len(labels) < 3 || len(labels) > 4 || labels[len(labels)-1] != "svc" {
		return nil, errNoName
	}
	host := ""
	if len(labels) == 4 {
		host, labels = labels[0], labels[1:]
	}
	svcName, ns := labels[0], labels[1]
	var svc corev1.Service
	if err := d.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: svcName}, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errNoName
		}
		return nil, err
	}
	if host == "" && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return []net.IP{net.ParseIP(svc.Spec.ClusterIP).To4()}, nil
	}
	var slices discoveryv1.EndpointSliceList
	if err := d.c.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svcName}); err != nil {
		return nil, err
	}
	var ips []net.IP
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			ready := e.Conditions.Ready == nil || *e.Conditions.Ready
			if !ready || host != "" && (e.Hostname == nil || *e.Hostname != host) {
				continue
			}
			for _, a := range e.Addresses {
				if ip := net.ParseIP(a).To4(); ip != nil {
					ips = append(ips, ip)
				}
			}
		}
	}
	if host != "" && len(ips) == 0 {
		return nil, errNoName
	}
	return ips, nil
}

// forward asks the machine's resolver (SERVFAIL when there is none or it does not answer).
func (d *clusterDNS) forward(req *dns.Msg) *dns.Msg {
	if d.upstream != "" {
		if r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(req, d.upstream); err == nil {
			return r
		}
	}
	m := new(dns.Msg)
	m.SetRcode(req, dns.RcodeServerFailure)
	return m
}

// publishDNS makes the DNS server visible as a real cluster's is: a Service kube-system/kube-dns
// (without a selector: the server is no pod) whose EndpointSlice is the node's address, port
// 53. Whoever shapes NetworkPolicies from it (the manager's DNS discovery) lets pods reach it.
func (c *Cluster) publishDNS(ctx context.Context) error {
	const ns, name = "kube-system", "kube-dns"
	ports := []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"k8s-app": name}},
		Spec:       corev1.ServiceSpec{Ports: ports},
	}
	udp, tcp, port := corev1.ProtocolUDP, corev1.ProtocolTCP, int32(53)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{c.NodeIP}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &ports[0].Name, Protocol: &udp, Port: &port}, {Name: &ports[1].Name, Protocol: &tcp, Port: &port}},
	}
	for _, o := range []client.Object{svc, slice} {
		// kube-system may be a moment younger than the API server's first answer.
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if err = c.Client.Create(ctx, o); err == nil || apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
				break
			}
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster DNS: publish %T: %w", o, err)
		}
	}
	return nil
}
