package e2e

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	_ "modernc.org/sqlite"

	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// TestServeDeliversToAWebhook runs what a user runs: `oncejob serve` on the
// embedded store with a --config whose sinks: section names a webhook, and
// the example receiver on SQLite. A submitted job's job.succeeded event is
// applied by the receiver once; `oncejob deliveries list` shows it
// delivered with the receiver's receipt; after serve stops, `oncejob
// reconcile` finds nothing off (exit 0).
func TestServeDeliversToAWebhook(t *testing.T) {
	t.Parallel()
	key := make([]byte, 24)
	_, _ = rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	recvDB := filepath.Join(t.TempDir(), "receiver.db")
	recvAddr := freeAddr(t)
	startBinary(t, "receiver", []string{"WEBHOOK_SECRETS=" + secret}, "receiver", "--addr", recvAddr, "--sqlite", recvDB)
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", recvAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 60*time.Second, 20*time.Millisecond)

	config := writeFile(t, "oncejob.yaml", fmt.Sprintf(`
sinks:
  - name: billing
    tenant: default
    events: [job.succeeded, job.failed, job.dead_lettered]
    webhook:
      url: http://%s/hook
      secret: {env: BILLING_WEBHOOK_SECRET}
      allow_private_network: true
`, recvAddr))
	dataDir := t.TempDir()
	addr := freeAddr(t)
	env := []string{"BILLING_WEBHOOK_SECRET=" + secret}
	srv := start(t, "serve", env, "serve", "--data-dir", dataDir, "--grpc-addr", addr, "--config", config, "--workers", "2", "--relay-poll-interval", "50ms")
	waitHealthy(t, srv, addr)
	require.NotContains(t, srv.logs.String(), secret, "the secret is never logged")

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx := metadata.AppendToOutgoingContext(context.Background(), "idempotency-key", "effects-e2e")
	sub, err := oncejobv1.NewJobServiceClient(conn).SubmitJob(ctx, &oncejobv1.SubmitJobRequest{
		Pipeline: "summarize",
		Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "Invoice 42: 3 licences, EUR 1,200."}},
	})
	require.NoError(t, err)
	eventID := "job:" + sub.GetJob().GetId() + ":job.succeeded:0"

	var list struct {
		Deliveries []struct {
			EventID     string `json:"eventId"`
			Status      string `json:"status"`
			ExternalRef string `json:"externalRef"`
		} `json:"deliveries"`
	}
	require.Eventually(t, func() bool {
		out, err := exec.Command(filepath.Join(binDir, "oncejob"), "deliveries", "list", "--addr", addr, "--json").CombinedOutput()
		require.NoError(t, err, string(out))
		require.NoError(t, json.Unmarshal(out, &list), string(out))
		return len(list.Deliveries) == 1 && list.Deliveries[0].Status == "DELIVERY_STATUS_DELIVERED"
	}, 60*time.Second, 100*time.Millisecond)
	require.Equal(t, eventID, list.Deliveries[0].EventID)
	require.Regexp(t, `^effect-\d+$`, list.Deliveries[0].ExternalRef)

	out, err := exec.Command(filepath.Join(binDir, "oncejob"), "deliveries", "list", "--addr", addr, "--attempts").CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "DELIVERED")
	require.Contains(t, string(out), "attempt 1")

	db, err := sql.Open("sqlite", "file:"+recvDB+"?mode=ro")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var applied int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM receiver_effects WHERE event_id = ?`, eventID).Scan(&applied))
	require.Equal(t, 1, applied)

	srv.stop()
	cmd := exec.Command(filepath.Join(binDir, "oncejob"), "reconcile", "--data-dir", dataDir, "--config", config, "--json")
	cmd.Env = append(cmd.Environ(), env...)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "reconcile found something off:\n%s", out)
	require.True(t, strings.Contains(string(out), `"lost": null`) || strings.Contains(string(out), `"lost": []`), string(out))
}
