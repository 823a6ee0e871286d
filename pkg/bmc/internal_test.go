package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/ingot-dev/ingot/pkg/machine"
)

// fixture decodes testdata/redfish-mockups/MOCKUP/redfish/v1/PATH/index.json
// (from the module root) into v.
func fixture(t testing.TB, mockup, path string, v any) {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		dir = filepath.Dir(dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, "testdata", "redfish-mockups", mockup, "redfish", "v1", path, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s %s: %v", mockup, path, err)
	}
}

func TestNormGPU(t *testing.T) {
	cases := map[string]struct {
		mockup, path string
		want         machine.GPU
	}{
		"HGX B200 with SystemInterface": {"supermicro-hgx-b200-partial", "Systems/HGX_Baseboard_0/Processors/GPU_SXM_1",
			machine.GPU{Slot: "SXM1", Vendor: "NVIDIA", Model: "B200 180GB HBM3e", VRAMMiB: 183359,
				LinkCurrent: machine.PCIeLink{Gen: 5, Width: 16}, LinkMax: machine.PCIeLink{Gen: 5, Width: 16}, Health: "OK"}},
		"Cray A100 (bare)": {"hpe-cray-ex235n-a100", "Systems/Node0/Processors/GPU0",
			machine.GPU{Slot: "GPU0", Vendor: "NVIDIA", Model: "NVIDIA_A100-SXM4-40GB", Serial: "1322520068320", Health: "OK"}},
		"DMTF tower TU102 (MemorySummary)": {"dmtf-public-tower", "Systems/437XR1238R2/Processors/GPU1",
			machine.GPU{Slot: "GPU1", Vendor: "Nvidia(R) Corporation", Model: "Nvidia(R) TU102", VRAMMiB: 11264, Health: "OK"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var p schemas.Processor
			fixture(t, tc.mockup, tc.path, &p)
			if d := cmp.Diff(tc.want, normGPU(&p)); d != "" {
				t.Errorf("normGPU (-want +got):\n%s", d)
			}
		})
	}
}

func TestNormPowerAndMemory(t *testing.T) {
	var p schemas.Power
	fixture(t, "dmtf-public-rackmount1", "Chassis/1U/Power", &p)
	if got := normPowerControl(p.PowerControl); got.Watts != 344 {
		t.Errorf("rackmount1 watts = %d, want 344", got.Watts)
	}
	var m schemas.Memory
	fixture(t, "gigabyte-ami-h262-z63", "Systems/Self/Memory/1", &m)
	d, ok := normDIMM(&m)
	if !ok || d.SizeMiB == 0 || d.Type != "DDR4" {
		t.Errorf("gigabyte DIMM = %+v, %v", d, ok)
	}
	var hbm schemas.Memory
	fixture(t, "supermicro-hgx-b200-partial", "Systems/1/Memory/GPU_0_DRAM_0", &hbm)
	if d, ok := normDIMM(&hbm); ok {
		t.Errorf("GPU DRAM counted as a DIMM: %+v", d)
	}
}

func TestPCIeGen(t *testing.T) {
	for in, want := range map[schemas.PCIeTypes]int{"Gen1": 1, "Gen5": 5, "Gen6": 6, "": 0, "Weird": 0} {
		if got := pcieGen(in); got != want {
			t.Errorf("pcieGen(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestMergeNICs(t *testing.T) {
	eths := []machine.NIC{{Name: "1", MAC: "aa:bb:cc:dd:ee:01", SpeedMbps: 1000, LinkUp: true}, {Name: "HPCNet0"}}
	adapters := []adapter{
		{id: "NIC1", vendor: "Mellanox", model: "ConnectX-7", firmware: "28.39", ports: []machine.NIC{
			{Name: "NIC1/1", MAC: "aa:bb:cc:dd:ee:01", SpeedMbps: 400000, LinkUp: true},
			{Name: "NIC1/2", MAC: "aa:bb:cc:dd:ee:02", SpeedMbps: 400000}}},
		{id: "HPCNet0", vendor: "HPE", model: "Slingshot"},
		{id: "Lone", vendor: "Intel", model: "E810"},
	}
	want := []machine.NIC{
		{Name: "1", MAC: "aa:bb:cc:dd:ee:01", Vendor: "Mellanox", Model: "ConnectX-7", Firmware: "28.39", SpeedMbps: 1000, LinkUp: true},
		{Name: "HPCNet0", Vendor: "HPE", Model: "Slingshot"},
		{Name: "NIC1/2", MAC: "aa:bb:cc:dd:ee:02", SpeedMbps: 400000},
		{Name: "Lone", Vendor: "Intel", Model: "E810"},
	}
	if d := cmp.Diff(want, mergeNICs(eths, adapters)); d != "" {
		t.Errorf("mergeNICs (-want +got):\n%s", d)
	}
}

func TestWrapErrKinds(t *testing.T) {
	redfish := func(status int) error {
		return schemas.ConstructError(status, []byte(`{"error":{"code":"Base.1.0.GeneralError","message":"m",`+
			`"@Message.ExtendedInfo":[{"MessageId":"Base.1.0.X","Message":"detail"}]}}`))
	}
	cases := map[string]struct {
		err  error
		kind Kind
	}{
		"401":           {redfish(401), KindAuth},
		"403":           {redfish(403), KindAuth},
		"404":           {redfish(404), KindNotFound},
		"405":           {redfish(405), KindUnsupported},
		"501":           {redfish(501), KindUnsupported},
		"409":           {redfish(409), KindBusy},
		"503":           {redfish(503), KindBusy},
		"400":           {redfish(400), KindInvalid},
		"500":           {redfish(500), KindServer},
		"deadline":      {fmt.Errorf("x: %w", context.DeadlineExceeded), KindTimeout},
		"canceled":      {context.Canceled, KindCanceled},
		"refused":       {fmt.Errorf("dial: %w", syscall.ECONNREFUSED), KindUnreachable},
		"bad json":      {&json.SyntaxError{}, KindBadResponse},
		"already typed": {&Error{Kind: KindBusy, Op: "inner"}, KindBusy},
		"collection":    {&schemas.CollectionError{Failures: map[string]error{"/b": redfish(500), "/a": redfish(404)}}, KindNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := wrapErr("https://bmc1", "doing it", tc.err)
			var be *Error
			if !errors.As(err, &be) || be.Kind != tc.kind || be.Endpoint != "https://bmc1" {
				t.Fatalf("wrapErr = %#v, want kind %v naming the endpoint", err, tc.kind)
			}
			if name != "already typed" && !errors.Is(err, tc.err) && !errors.As(err, new(*schemas.CollectionError)) {
				t.Errorf("%v does not unwrap to %v", err, tc.err)
			}
		})
	}
	e := wrapErr("https://bmc1", "power on", redfish(409)).(*Error)
	if d := cmp.Diff([]string{"Base.1.0.X: detail"}, e.Messages); d != "" || e.Status != 409 {
		t.Errorf("messages/status: %v %d\n%s", e.Messages, e.Status, d)
	}
}

func TestErrorBody(t *testing.T) {
	cases := map[string]struct {
		body string
		want bool
	}{
		"redfish error":                 {`{"error":{"code":"Base.1.4.ResourceMissingAtURI","message":"gone"}}`, true},
		"resource":                      {`{"@odata.id":"/redfish/v1","Id":"x"}`, false},
		"resource with an error member": {`{"Id":"x","Name":"n","error":{"code":"c"}}`, false},
		"not json":                      {`<html>`, false},
		"empty":                         {``, false},
	}
	for name, tc := range cases {
		if got := errorBody([]byte(tc.body)) != nil; got != tc.want {
			t.Errorf("%s: errorBody = %v, want %v", name, got, tc.want)
		}
	}
}

func FuzzErrorBody(f *testing.F) {
	f.Add([]byte(`{"error":{"code":"c","message":"m","@Message.ExtendedInfo":[{"MessageId":"x"}]}}`))
	f.Add([]byte(`{"error":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if se := errorBody(b); se != nil {
			_ = redfishMessages(se)
		}
	})
}

func TestRetryPolicyAndBackoff(t *testing.T) {
	ctx := context.Background()
	resp := func(code int) *http.Response { return &http.Response{StatusCode: code, Header: http.Header{}} }
	cases := map[string]struct {
		resp *http.Response
		err  error
		want bool
	}{
		"503":          {resp(503), nil, true},
		"409":          {resp(409), nil, true},
		"500":          {resp(500), nil, true},
		"501":          {resp(501), nil, false},
		"404":          {resp(404), nil, false},
		"401":          {resp(401), nil, false},
		"200":          {resp(200), nil, false},
		"refused":      {nil, syscall.ECONNREFUSED, true},
		"read timeout": {nil, &Error{Kind: KindTimeout}, false},
	}
	for name, tc := range cases {
		if got, _ := retryPolicy(ctx, tc.resp, tc.err); got != tc.want {
			t.Errorf("%s: retry = %v, want %v", name, got, tc.want)
		}
	}
	post := context.WithValue(ctx, postKey{}, true)
	for name, tc := range map[string]struct {
		resp *http.Response
		err  error
		want bool
	}{
		"POST 503":                {resp(503), nil, true},
		"POST refused":            {nil, syscall.ECONNREFUSED, true},
		"POST reset (maybe sent)": {nil, syscall.ECONNRESET, false},
	} {
		if got, _ := retryPolicy(post, tc.resp, tc.err); got != tc.want {
			t.Errorf("%s: retry = %v, want %v", name, got, tc.want)
		}
	}
	// A password on trial is sent once: only a connection that never
	// reached the BMC is tried again.
	once := context.WithValue(ctx, onceKey{}, true)
	for name, tc := range map[string]struct {
		resp *http.Response
		err  error
		want bool
	}{
		"on trial 503":     {resp(503), nil, false},
		"on trial 500":     {resp(500), nil, false},
		"on trial 401":     {resp(401), nil, false},
		"on trial refused": {nil, syscall.ECONNREFUSED, true},
		"on trial reset":   {nil, syscall.ECONNRESET, false},
	} {
		if got, _ := retryPolicy(once, tc.resp, tc.err); got != tc.want {
			t.Errorf("%s: retry = %v, want %v", name, got, tc.want)
		}
	}
	b := backoff(time.Second)
	if got := []time.Duration{b(0, 0, 0, nil), b(0, 0, 1, nil), b(0, 0, 2, nil), b(0, 0, 7, nil)}; !cmp.Equal(got,
		[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}) {
		t.Errorf("backoff = %v", got)
	}
	r := resp(503)
	r.Header.Set("Retry-After", "120")
	if got := b(0, 0, 0, r); got != 4*time.Second {
		t.Errorf("Retry-After 120 gave %v, want the 4 s cap", got)
	}
}

// Basic auth follows a failed session login only where the BMC turned the
// session service down, never after it judged the password.
func TestBasicFallback(t *testing.T) {
	for kind, want := range map[Kind]bool{
		KindAuth: false, KindBusy: false, KindTimeout: false, KindUnreachable: false, KindCanceled: false,
		KindNotFound: true, KindUnsupported: true, KindInvalid: true, KindServer: true, KindBadResponse: true, KindOther: true,
	} {
		if got := basicFallback(&Error{Kind: kind}); got != want {
			t.Errorf("%v: fallback %v, want %v", kind, got, want)
		}
	}
}

// Only requests that send a password are marked on trial.
func TestCarriesPassword(t *testing.T) {
	for name, tc := range map[string]struct {
		method, path string
		basic        bool
		want         bool
	}{
		"session login":       {http.MethodPost, "/redfish/v1/SessionService/Sessions", false, true},
		"session login slash": {http.MethodPost, "/redfish/v1/SessionService/Sessions/", false, true},
		"basic GET":           {http.MethodGet, "/redfish/v1/Systems", true, true},
		"token GET":           {http.MethodGet, "/redfish/v1/Systems", false, false},
		"logout":              {http.MethodDelete, "/redfish/v1/SessionService/Sessions/1", false, false},
		"service root":        {http.MethodGet, "/redfish/v1/", false, false},
	} {
		req, _ := http.NewRequest(tc.method, "https://bmc1"+tc.path, nil)
		if tc.basic {
			req.SetBasicAuth("u", "p")
		}
		if got := carriesPassword(req); got != tc.want {
			t.Errorf("%s: carriesPassword = %v, want %v", name, got, tc.want)
		}
	}
}

func TestBootTargetAndAttributes(t *testing.T) {
	allowed := []schemas.BootSource{"Pxe", "Hdd"}
	if err := checkBootTarget("Pxe", allowed); err != nil {
		t.Error(err)
	}
	if err := checkBootTarget("UefiHttp", allowed); err == nil || !contains(err.Error(), "[Pxe Hdd]") {
		t.Errorf("err = %v, want the allowed targets named", err)
	}
	if err := checkBootTarget("UefiHttp", nil); err != nil {
		t.Errorf("no allowable values listed: %v", err)
	}
	have := map[string]any{"A": json.Number("1"), "B": "1", "C": true,
		"D": map[string]any{"current_value": "Enabled"}}
	got := compareAttributes(have, map[string]any{"A": int64(1), "B": int64(1), "C": true, "D": "Enabled", "E": "x"})
	want := []Mismatch{{Name: "B", Want: int64(1), Got: "1"}, {Name: "E", Want: "x", Missing: true}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("compareAttributes (-want +got):\n%s", d)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
