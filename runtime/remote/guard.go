package remote

import (
	"net"
	"strings"
	"sync"
	"time"
)

// hostAllowed reports whether a request's Host header names this server.
// With a token every name is accepted (the token is the protection).
// Without one, only loopback addresses, "localhost" (and its subdomains,
// which resolve to loopback) and the names in AllowedHosts are: a page of
// another site whose name an attacker points at 127.0.0.1 (DNS rebinding)
// sends its own name as Host, and its own origin, which the origin check
// would then take for the server's.
func (s *Server) hostAllowed(hostport string) bool {
	if s.o.Token != "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || s.listed(host)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	return s.listed(host)
}

func (s *Server) listed(host string) bool {
	for _, a := range s.o.AllowedHosts {
		if strings.EqualFold(strings.TrimSuffix(a, "."), host) {
			return true
		}
	}
	return false
}

// Token guessing is rate-limited per peer address: after authMaxFails
// wrong tokens within authWindow, the address is refused (without a
// comparison) until the window has passed.
const (
	authMaxFails = 5
	authWindow   = 10 * time.Second
	authMaxPeers = 4096 // addresses remembered; the oldest are forgotten first
)

type authFailures struct {
	n     int
	since time.Time
}

type authLimiter struct {
	mu    sync.Mutex
	fails map[string]*authFailures
}

func peerIP(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// blocked returns how long the address must wait, or 0.
func (l *authLimiter) blocked(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.fails[peerIP(addr)]
	if f == nil || f.n < authMaxFails {
		return 0
	}
	if wait := authWindow - time.Since(f.since); wait > 0 {
		return wait
	}
	delete(l.fails, peerIP(addr))
	return 0
}

// failed counts a wrong token from the address.
func (l *authLimiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ip := peerIP(addr)
	f := l.fails[ip]
	if f == nil || time.Since(f.since) > authWindow {
		if len(l.fails) >= authMaxPeers {
			l.forgetOldest()
		}
		f = &authFailures{since: time.Now()}
		l.fails[ip] = f
	}
	f.n++
}

func (l *authLimiter) forgetOldest() {
	var oldest string
	var t time.Time
	for ip, f := range l.fails {
		if oldest == "" || f.since.Before(t) {
			oldest, t = ip, f.since
		}
	}
	delete(l.fails, oldest)
}
