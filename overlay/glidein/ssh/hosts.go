package ssh

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// maxUserLen bounds a user name in a host entry (Linux allows 32).
const maxUserLen = 256

// parseHost reads one entry of Config.Hosts, [USER@]HOST[:PORT], and
// returns its user (empty when the entry names none) and its address,
// HOST:PORT with the port (22 by default) in decimal without leading
// zeros. HOST is a name or an IPv4 address, or an IPv6 address in
// brackets ("[::1]", "[::1]:2222"). The errors quote the entry.
func parseHost(entry string) (user, addr string, err error) {
	bad := func(format string, a ...any) (string, string, error) {
		return "", "", fmt.Errorf("host %q: %s", entry, fmt.Sprintf(format, a...))
	}
	if strings.TrimSpace(entry) == "" {
		return "", "", errors.New("empty host")
	}
	hp := entry
	if u, rest, ok := strings.Cut(entry, "@"); ok {
		switch {
		case u == "":
			return bad("empty user before '@' (want USER@HOST:PORT, or HOST:PORT for the provider's user)")
		case len(u) > maxUserLen:
			return bad("user of %d bytes: at most %d", len(u), maxUserLen)
		case u[0] == '-' || !validName(u, "._-$"):
			return bad("user %q: a name of letters, digits, '.', '_', '-' and '$' not starting with '-' is needed", u)
		case strings.Contains(rest, "@"):
			return bad("more than one '@'")
		}
		user, hp = u, rest
	}
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		var ae *net.AddrError
		if !errors.As(err, &ae) || ae.Err != "missing port in address" {
			if strings.Count(hp, ":") > 1 && !strings.HasPrefix(hp, "[") {
				return bad("an IPv6 address needs brackets: [ADDRESS] or [ADDRESS]:PORT")
			}
			return bad("%v", err)
		}
		h, p = hp, defaultPort
		if strings.HasPrefix(h, "[") {
			if !strings.HasSuffix(h, "]") || len(h) < 2 {
				return bad("no ']' after an IPv6 address")
			}
			h = h[1 : len(h)-1]
		}
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n < 1 {
		return bad("port %q is not a number from 1 to 65535", p)
	}
	if h == "" {
		return bad("no host name or address")
	}
	if !validHostName(h) {
		return bad("%q is not a host name or address", h)
	}
	return user, net.JoinHostPort(h, strconv.FormatUint(n, 10)), nil
}

// validHostName reports whether h may be a host name or an address:
// printable ASCII without spaces, '/', '@', brackets, quotes or shell
// punctuation, and ':' only in an IPv6 address (with its zone after '%').
func validHostName(h string) bool {
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte("/@[]\\'\"`$;&|<>(){}*?!#,", c) >= 0 {
			return false
		}
	}
	if strings.Contains(h, ":") {
		ip := net.ParseIP(strings.SplitN(h, "%", 2)[0])
		return ip != nil
	}
	return true
}
