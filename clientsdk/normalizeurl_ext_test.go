package clientsdk_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/clientsdk"
)

func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://example.com/a", "https://example.com/a"},
		{"HTTPS://Example.COM/a", "https://example.com/a"},
		{"https://example.com", "https://example.com/"},
		{"http://example.com:80/a", "http://example.com/a"},
		{"https://example.com:443/a", "https://example.com/a"},
		{"http://example.com:443/a", "http://example.com:443/a"},
		{"https://example.com:8443/a", "https://example.com:8443/a"},
		{"https://example.com:/a", "https://example.com/a"},
		{"https://[::1]:443/a", "https://[::1]/a"},
		{"https://[::1]:8443/a", "https://[::1]:8443/a"},
		{"https://example.com/a#section-2", "https://example.com/a"},
		{"https://example.com/a?b=2&a=1", "https://example.com/a?a=1&b=2"},
		{"https://example.com/a?utm_source=x&utm_medium=y&id=7", "https://example.com/a?id=7"},
		{"https://example.com/a?UTM_Campaign=x&id=7", "https://example.com/a?id=7"},
		{"https://example.com/a?gclid=1&fbclid=2&msclkid=3&dclid=4&yclid=5&igshid=6&mc_cid=7&mc_eid=8&_hsenc=9&_hsmi=10&gbraid=11&wbraid=12", "https://example.com/a"},
		{"https://example.com/a?utm_source=x", "https://example.com/a"},
		{"https://example.com/a?", "https://example.com/a"},
		{"https://example.com/a?x=2&x=1", "https://example.com/a?x=2&x=1"}, // one name's values keep their order
		{"https://example.com/a?q=a+b&q2=a%20b", "https://example.com/a?q=a+b&q2=a+b"},
		{"https://example.com/Path/Case", "https://example.com/Path/Case"},
		{"https://user:pw@Example.com/a", "https://user:pw@example.com/a"},
		{"  https://example.com/a  ", "https://example.com/a"},
		{"https://example.com/a%2Fb", "https://example.com/a%2Fb"},
		{"https://example.com/über", "https://example.com/%C3%BCber"},
		{"https://example.com/a?utm_source=x#frag", "https://example.com/a"},
	} {
		got, err := clientsdk.NormalizeURL(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		again, err := clientsdk.NormalizeURL(got)
		require.NoError(t, err)
		require.Equal(t, got, again, "NormalizeURL is idempotent on %q", tc.in)
	}
	for _, bad := range []string{"", "example.com/a", "/a/b", "https://", "://x", "https://exa mple.com/"} {
		_, err := clientsdk.NormalizeURL(bad)
		require.Error(t, err, bad)
	}
}
