package apifuzz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/oncejob/oncejob/gateway"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// A case is one request: its kind (what it mutates), and how to send it.
type fuzzCase struct {
	kind string
	desc string
}

func TestAPIFuzz(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./tests/apifuzz -run TestAPIFuzz -apifuzz.seed %d -apifuzz.requests %d)", seed, seed, *flagRequests)
	routes := httpRoutes(t)
	forEachStore(t, func(t *testing.T, st fuzzStore) {
		tg := start(t, st)
		g := &gen{r: rand.New(rand.NewPCG(seed, 0x0ce))}
		g.ids = seedRows(t, tg)
		methods := rpcMethods()

		before := snapshot(t, st, "acme")
		counts := map[string]int{}
		for i := range *flagRequests {
			var (
				c       fuzzCase
				refused bool
				failure string
				viaHTTP = g.chance(0.4)
			)
			t0 := time.Now()
			if viaHTTP {
				c, refused, failure = tg.sendHTTP(t, g, routes)
			} else {
				c, refused, failure = tg.sendRPC(t, g, methods)
			}
			if d := time.Since(t0); d > time.Second {
				t.Logf("slow: %s %s: %s", d, c.kind, c.desc)
			}
			counts[strings.SplitN(c.kind, "/", 2)[0]]++
			if failure != "" {
				t.Fatalf("request %d (seed %d), %s %s: %s", i, seed, c.kind, c.desc, failure)
			}
			after := snapshot(t, st, "acme")
			if refused {
				require.Equal(t, before, after, "request %d (seed %d), %s %s: a refused request changed the tenant's rows", i, seed, c.kind, c.desc)
			}
			before = after
		}
		t.Logf("requests: %v", counts)

		// The server still answers a normal request.
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+keyAcme, "idempotency-key", "after-"+uuid.NewString())
		resp, err := oncejobv1.NewJobServiceClient(tg.conn).SubmitJob(ctx, validSubmit())
		require.NoError(t, err)
		got, err := oncejobv1.NewJobServiceClient(tg.conn).GetJob(ctx, &oncejobv1.GetJobRequest{JobId: resp.GetJob().GetId()})
		require.NoError(t, err)
		require.Equal(t, resp.GetJob().GetId(), got.GetJob().GetId())
		r := tg.http(t, http.MethodGet, "/v1/jobs/"+resp.GetJob().GetId(), map[string]string{"Authorization": "Bearer " + keyAcme}, nil)
		require.Equal(t, http.StatusOK, r)
	})
}

func validSubmit() *oncejobv1.SubmitJobRequest {
	return &oncejobv1.SubmitJobRequest{
		Pipeline: "summarize",
		Document: &oncejobv1.Document{Content: &oncejobv1.Document_Text{Text: "Invoice 42: 3 licences."}, MediaType: "text/plain"},
	}
}

// seedRows makes a job, a run and a schedule of acme, so hostile requests
// also name rows that exist.
func seedRows(t *testing.T, tg *target) []string {
	t.Helper()
	ctx := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+keyAcme, "idempotency-key", key)
	}
	job, err := oncejobv1.NewJobServiceClient(tg.conn).SubmitJob(ctx("seed-job"), validSubmit())
	require.NoError(t, err)
	run, err := oncejobv1.NewRunServiceClient(tg.conn).CreateRun(ctx("seed-run"), &oncejobv1.CreateRunRequest{Name: "seed"})
	require.NoError(t, err)
	sch, err := oncejobv1.NewScheduleServiceClient(tg.conn).CreateSchedule(ctx("seed-schedule"), &oncejobv1.CreateScheduleRequest{
		Name: "seed", Spec: &oncejobv1.CreateScheduleRequest_Cron{Cron: "0 3 * * *"}, Job: validSubmit(),
	})
	require.NoError(t, err)
	return []string{job.GetJob().GetId(), run.GetRun().GetId(), sch.GetSchedule().GetId()}
}

type rpcMethod struct {
	fullName string
	desc     protoreflect.MethodDescriptor
}

// rpcMethods are every method of every service in proto/, and Health.
func rpcMethods() []rpcMethod {
	var out []rpcMethod
	for _, fd := range []protoreflect.FileDescriptor{
		oncejobv1.File_oncejob_v1_job_proto, oncejobv1.File_oncejob_v1_run_proto,
		oncejobv1.File_oncejob_v1_schedule_proto, oncejobv1.File_oncejob_v1_delivery_proto,
		healthpb.File_grpc_health_v1_health_proto,
	} {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				out = append(out, rpcMethod{fullName: "/" + string(sd.FullName()) + "/" + string(md.Name()), desc: md})
			}
		}
	}
	return out
}

// rawCodec sends and receives bytes as they are, so the fuzzer can send
// what no protobuf encoder makes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *(v.(*[]byte)) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

// badGRPC are the codes a request can never earn: the server's fault.
var badGRPC = map[codes.Code]bool{codes.Internal: true, codes.Unknown: true, codes.Unavailable: true, codes.DataLoss: true}

// sendRPC sends one hostile request to a random method and reports whether
// it was refused and what invariant it broke.
func (tg *target) sendRPC(t *testing.T, g *gen, methods []rpcMethod) (fuzzCase, bool, string) {
	t.Helper()
	m := methods[g.pick(len(methods))]
	c := fuzzCase{kind: "grpc/fields", desc: m.fullName}
	req := newMessage(m.desc.Input())
	if g.chance(0.5) {
		template(req.Interface(), g)
	}
	g.fill(req, 0)
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(req.Interface())
	require.NoError(t, err)
	switch g.pick(12) {
	case 0: // garbage
		c.kind = "grpc/garbage"
		body = []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x02}
	case 1: // a string field that is not UTF-8
		if f := m.desc.Input().Fields().ByNumber(1); f != nil && f.Kind() == protoreflect.StringKind && !f.IsList() {
			c.kind = "grpc/invalid-utf8"
			body = protowire.AppendTag(body, 1, protowire.BytesType) // the last value of a field wins
			body = protowire.AppendBytes(body, []byte("a\xffb"))
		}
	case 2: // nesting beyond protobuf's recursion limit
		c.kind = "grpc/deep-nesting"
		body = tg.deepNesting(m.desc.Input())
		if body == nil {
			c.kind = "grpc/fields"
			body, _ = proto.Marshal(req.Interface())
		}
	}
	md := metadata.MD{}
	switch g.pick(10) {
	case 0:
	case 1:
		md.Set("authorization", g.header())
	case 2:
		md.Set("authorization", "Bearer "+keyGlobex) // a submitter of another tenant
	default:
		md.Set("authorization", "Bearer "+keyAcme)
	}
	if g.chance(0.8) {
		md.Set("idempotency-key", []string{uuid.NewString(), g.header()}[g.pick(2)])
	}
	if g.chance(0.2) {
		md.Set("x-request-id", g.header())
	}
	if g.chance(0.1) {
		md.Append("idempotency-key", "second")
	}
	if len(md.Get("idempotency-key")) > 0 && strings.HasPrefix(m.fullName, "/grpc.health.") {
		c.kind = "grpc/health-idempotency-key"
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 30*time.Second)
	defer cancel()

	var callErr error
	if m.desc.IsStreamingServer() {
		sctx, scancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer scancel()
		stream, err := tg.conn.NewStream(sctx, &grpc.StreamDesc{ServerStreams: true}, m.fullName, grpc.ForceCodec(rawCodec{}))
		if err == nil {
			err = stream.SendMsg(&body)
		}
		if err == nil {
			err = stream.CloseSend()
		}
		if err == nil {
			var out []byte
			err = stream.RecvMsg(&out)
		}
		if status.Code(err) == codes.DeadlineExceeded && sctx.Err() != nil {
			err = nil // a valid watch that had nothing yet to say
		}
		callErr = err
	} else {
		var out []byte
		callErr = tg.conn.Invoke(ctx, m.fullName, &body, &out, grpc.ForceCodec(rawCodec{}))
	}
	if errors.Is(callErr, io.EOF) {
		callErr = nil
	}
	st := status.Convert(callErr)
	c.desc = fmt.Sprintf("%s: %s %q", m.fullName, st.Code(), truncate(st.Message()))
	if badGRPC[st.Code()] {
		return c, true, fmt.Sprintf("answered %s: %s", st.Code(), st.Message())
	}
	// The client's own deadline says nothing of what the server did: the
	// call may have been written after it. Only the server's refusals count.
	unknown := ctx.Err() != nil
	return c, callErr != nil && !unknown, ""
}

func newMessage(md protoreflect.MessageDescriptor) protoreflect.Message {
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName()); err == nil {
		return mt.New()
	}
	return dynamicpb.NewMessage(md)
}

// template makes req a valid request of its kind, for the fuzzer to
// mutate: so hostile values also reach what lies behind validation.
func template(req proto.Message, g *gen) {
	id := uuid.NewString()
	if len(g.ids) > 0 {
		id = g.ids[g.pick(len(g.ids))]
	}
	switch r := req.(type) {
	case *oncejobv1.SubmitJobRequest:
		proto.Merge(r, validSubmit())
	case *oncejobv1.SubmitJobsRequest:
		r.Items = []*oncejobv1.SubmitJobsItem{{IdempotencyKey: uuid.NewString(), Request: validSubmit()}}
	case *oncejobv1.CreateRunRequest:
		r.Name = "nightly"
	case *oncejobv1.CreateScheduleRequest:
		r.Name, r.Spec, r.Job = "nightly", &oncejobv1.CreateScheduleRequest_Cron{Cron: "0 3 * * *"}, validSubmit()
	default:
		// Every *_id string field names a real row.
		m := req.ProtoReflect()
		fields := m.Descriptor().Fields()
		for i := range fields.Len() {
			if fd := fields.Get(i); fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap() && strings.HasSuffix(string(fd.Name()), "_id") {
				m.Set(fd, protoreflect.ValueOfString(id))
			}
		}
	}
}

// deepNesting is deepMessage 12,000 levels deep, made once per message.
func (tg *target) deepNesting(md protoreflect.MessageDescriptor) []byte {
	if b, ok := tg.deep[md.FullName()]; ok {
		return b
	}
	b := deepMessage(md, 12000)
	tg.deep[md.FullName()] = b
	return b
}

// deepMessage is a message nested depth times through its first Struct
// field (a Struct of params reaches itself), or nil when it has none.
// Marshalling has no depth limit; unmarshalling does.
func deepMessage(md protoreflect.MessageDescriptor, depth int) []byte {
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		if fd.Message() == nil || fd.Message().FullName() != "google.protobuf.Struct" || fd.IsList() || fd.IsMap() {
			continue
		}
		s := &structpb.Struct{}
		for range depth {
			s = &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStructValue(s)}}
		}
		m := newMessage(md)
		m.Set(fd, protoreflect.ValueOfMessage(s.ProtoReflect()))
		b, err := proto.Marshal(m.Interface())
		if err != nil {
			return nil
		}
		return b
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// route is one HTTP rule of proto/oncejob/v1/http.yaml, or a watch.
type route struct {
	method, path string
	input        protoreflect.MessageDescriptor
}

// httpRoutes reads every route of the gateway from its rules, so a route
// added there is fuzzed too; the watches (served by gateway/watch.go) and
// the health check are added by hand.
func httpRoutes(t *testing.T) []route {
	t.Helper()
	raw, err := os.ReadFile("../../proto/oncejob/v1/http.yaml")
	require.NoError(t, err)
	var cfg struct {
		HTTP struct {
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"http"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &cfg))
	var out []route
	add := func(selector string, rule map[string]any) {
		desc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(selector))
		require.NoError(t, err, selector)
		input := desc.(protoreflect.MethodDescriptor).Input()
		for _, verb := range []string{"get", "post", "delete", "patch", "put"} {
			if p, ok := rule[verb].(string); ok {
				out = append(out, route{method: strings.ToUpper(verb), path: p, input: input})
			}
		}
	}
	for _, rule := range cfg.HTTP.Rules {
		sel := rule["selector"].(string)
		add(sel, rule)
		if more, ok := rule["additional_bindings"].([]any); ok {
			for _, b := range more {
				add(sel, b.(map[string]any))
			}
		}
	}
	require.Greater(t, len(out), 20, "every rule read")
	out = append(out,
		route{method: http.MethodGet, path: "/v1/jobs/{job_id}:watch", input: (&oncejobv1.WatchJobRequest{}).ProtoReflect().Descriptor()},
		route{method: http.MethodGet, path: "/v1/jobs:watch", input: (&oncejobv1.WatchJobsRequest{}).ProtoReflect().Descriptor()},
		route{method: http.MethodGet, path: "/healthz", input: (&healthpb.HealthCheckRequest{}).ProtoReflect().Descriptor()},
	)
	return out
}

// statusUnknown is the answer to a request whose client gave up first:
// whether the server wrote anything is not known, so it is no refusal.
const statusUnknown = 0

var pathVar = regexp.MustCompile(`\{[a-z_]+\}`)

// sendHTTP sends one hostile request to a random route.
func (tg *target) sendHTTP(t *testing.T, g *gen, routes []route) (fuzzCase, bool, string) {
	t.Helper()
	rt := routes[g.pick(len(routes))]
	c := fuzzCase{kind: "http/fields"}
	method := rt.method
	if g.chance(0.05) {
		method = []string{http.MethodPut, http.MethodPatch, http.MethodOptions, "BREW"}[g.pick(4)]
	}
	path := pathVar.ReplaceAllStringFunc(rt.path, func(string) string {
		switch g.pick(4) {
		case 0:
			return []string{"%00", "%ff", "..%2F..", "a%20b", strings.Repeat("x", 5000)}[g.pick(5)]
		case 1:
			return url.PathEscape(g.rawText())
		default:
			if len(g.ids) > 0 {
				return g.ids[g.pick(len(g.ids))]
			}
			return uuid.NewString()
		}
	})
	if g.chance(0.6) {
		q := url.Values{}
		fields := rt.input.Fields()
		for range 1 + g.pick(3) {
			name := "unknown_field"
			if fields.Len() > 0 && g.chance(0.9) {
				name = string(fields.Get(g.pick(fields.Len())).Name())
			}
			q.Add(name, g.rawText())
		}
		path += "?" + q.Encode()
		if g.chance(0.1) {
			path += "&" + []string{"%", "a=%zz", "page_size=1e99", "status=-1", "=x"}[g.pick(5)]
		}
	}
	header := map[string]string{}
	switch g.pick(10) {
	case 0:
	case 1:
		header["Authorization"] = g.header()
	case 2:
		header["Authorization"] = "Bearer " + keyGlobex
	default:
		header["Authorization"] = "Bearer " + keyAcme
	}
	if g.chance(0.8) {
		header["Idempotency-Key"] = []string{uuid.NewString(), g.header(), "é\xff"}[g.pick(3)]
	}
	if g.chance(0.2) {
		header[[]string{"X-Request-Id", "Last-Event-ID", "Accept", "Grpc-Timeout", "Grpc-Metadata-Foo", "Content-Encoding"}[g.pick(6)]] = g.header() + "\xff"
	}
	if _, ok := header["Idempotency-Key"]; ok && rt.path == "/healthz" {
		c.kind = "http/healthz-idempotency-key"
	}
	var body []byte
	if method != http.MethodGet || g.chance(0.1) {
		body = g.httpBody(rt, &c)
		header["Content-Type"] = "application/json"
		if g.chance(0.08) {
			header["Content-Type"] = []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=latin1", "", "application/grpc"}[g.pick(6)]
		}
	}
	code := tg.http(t, method, path, header, body)
	c.desc = fmt.Sprintf("%s %s (%d bytes): %d", method, truncate(path), len(body), code)
	if code >= 500 || code == http.StatusTooManyRequests && c.kind == "http/body-over-rpc" {
		return c, true, fmt.Sprintf("answered %d", code)
	}
	return c, code >= 400 && code != statusUnknown, ""
}

// httpBody is a hostile JSON body for rt: a reflected hostile message with
// its strings spoiled, or a malformed, deep or oversize document.
func (g *gen) httpBody(rt route, c *fuzzCase) []byte {
	switch g.pick(14) {
	case 0:
		return []byte(strings.Repeat("[", 100000))
	case 1:
		return []byte(`{"pipeline": "summarize", "document": {"text": "` + strings.Repeat("[", 0) + `\ud800 lone"}}`)
	case 2:
		return []byte("{\"pipeline\": \"summ\xffarize\", \"document\": {\"text\": \"a\x00b\"}}")
	case 3:
		return []byte(`{"document": {"text": "a\u0000b"}, "pipeline": "summarize", "params": {"k": "\u0000"}, "reason": "\u0000", "name": "n\u0000"}`)
	case 4:
		return []byte(`{`)
	case 5:
		return []byte(`{"pipeline": 1e999, "document": {"data": "!!!not base64"}}`)
	case 6:
		// Over the gRPC receive limit, under the HTTP body limit.
		c.kind = "http/body-over-rpc"
		return []byte(`{"pipeline": "summarize", "document": {"text": "` + strings.Repeat("x", maxDocumentBytes+(1<<20)+1024) + `"}}`)
	case 7:
		c.kind = "http/body-over-limit"
		return bytes.Repeat([]byte(" "), 2*maxDocumentBytes+(1<<20)+1)
	case 8:
		return []byte(`{"params": ` + strings.Repeat(`{"a": `, 200) + `1` + strings.Repeat(`}`, 200) + `}`)
	default:
		m := newMessage(rt.input)
		template(m.Interface(), g)
		g.fill(m, 0)
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m.Interface())
		if err != nil {
			return []byte(`{}`)
		}
		if g.chance(0.3) {
			b = bytes.ReplaceAll(b, []byte(`"a`), []byte(`"\ud800a`))
		}
		return b
	}
}

// http sends one request and answers its status; a watch answering 200 is
// read no further.
func (tg *target) http(t *testing.T, method, path string, header map[string]string, body []byte) int {
	t.Helper()
	timeout := 30 * time.Second
	watch := strings.Contains(path, ":watch")
	if watch {
		timeout = 200 * time.Millisecond // a valid watch goes on: its headers are enough
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, tg.base+path, r)
	if err != nil {
		return http.StatusBadRequest // a request no client can send
	}
	keys := make([]string, 0, len(header))
	for k := range header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		req.Header.Set(k, header[k])
	}
	resp, err := tg.client.Do(req)
	switch {
	case err == nil:
	case watch && ctx.Err() != nil:
		return http.StatusOK // a valid watch with nothing to say yet
	case strings.Contains(err.Error(), "invalid header") || strings.Contains(err.Error(), "invalid method"):
		return http.StatusBadRequest // refused by the client, never sent
	case int64(len(body)) > gateway.MaxBodyBytesFor(maxDocumentBytes):
		// The server answered 413 and closed the connection while the
		// client was still writing: what the client sees is the reset.
		return http.StatusRequestEntityTooLarge
	case ctx.Err() != nil:
		return statusUnknown
	default:
		require.NoError(t, err, "%s %s", method, truncate(path))
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		return resp.StatusCode
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode
}
