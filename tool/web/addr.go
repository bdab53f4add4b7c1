package web

import (
	"fmt"
	"net/netip"
)

// AddrPolicy decides whether web_fetch may connect to an IP address. It is
// applied to the address actually dialed, after DNS, on every connection
// (the first request and each redirect), so neither a hostname that
// resolves to a forbidden address nor a redirect to one gets through.
type AddrPolicy func(netip.Addr) error

var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6 = netip.MustParsePrefix("fe80::/10")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	// Cloud metadata services outside the link-local ranges: AWS over IPv6
	// and Alibaba Cloud.
	metadata = []netip.Addr{netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200")}
)

// DefaultPolicy refuses link-local addresses (169.254.0.0/16, fe80::/10),
// where clouds serve instance metadata and credentials, and the other known
// metadata addresses. A model told by a web page to fetch
// http://169.254.169.254/ would otherwise hand it the machine's cloud
// credentials. Loopback and private networks stay reachable: a local
// documentation server or a test server is a legitimate target. Use
// PublicOnly where the agent must not reach the local network either.
func DefaultPolicy(a netip.Addr) error {
	a = canonical(a)
	if linkLocal4.Contains(a) || linkLocal6.Contains(a) {
		return fmt.Errorf("address %s is link-local (where cloud metadata services live)", a)
	}
	for _, m := range metadata {
		if a == m {
			return fmt.Errorf("address %s is a cloud metadata service", a)
		}
	}
	return nil
}

// PublicOnly allows only public unicast addresses: on top of
// DefaultPolicy it refuses loopback, private (RFC 1918, fc00::/7), shared
// (100.64.0.0/10), unspecified and multicast addresses.
func PublicOnly(a netip.Addr) error {
	if err := DefaultPolicy(a); err != nil {
		return err
	}
	a = canonical(a)
	switch {
	case a.IsLoopback():
		return fmt.Errorf("address %s is loopback", a)
	case a.IsPrivate(), cgnat.Contains(a):
		return fmt.Errorf("address %s is on a private network", a)
	case a.IsUnspecified(), a.IsMulticast(), !a.IsGlobalUnicast():
		return fmt.Errorf("address %s is not a public unicast address", a)
	}
	return nil
}

// canonical strips the IPv6 forms an IPv4 address can hide in: mapped
// (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d), and the zone: a zone
// (fe80::1%eth0) only says which interface to use, and netip.Prefix.Contains
// is false for every zoned address, so fe80::1%lo would slip past a
// link-local check that fe80::1 fails.
func canonical(a netip.Addr) netip.Addr {
	a = a.Unmap().WithZone("")
	if nat64.Contains(a) {
		b := a.As16()
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	return a
}
