package bmc

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
)

// FuzzParseTask: a task monitor's or Task resource's answer, whatever the
// BMC sends, parses without panicking; a TaskState given is kept, and an
// answer without one is Running (202) or ended.
func FuzzParseTask(f *testing.F) {
	for _, s := range []string{
		`{"@odata.id": "/redfish/v1/TaskService/Tasks/1", "TaskState": "Running", "PercentComplete": 40, "StartTime": "2026-01-02T03:04:05Z"}`,
		`{"TaskState": "Exception", "TaskStatus": "Critical", "Messages": [{"MessageId": "Update.1.0.ApplyFailed", "Message": "flash"}]}`,
		`{"error": {"code": "Base.1.0.GeneralError", "message": "x"}}`,
		`{"TaskState": "Completed", "StartTime": "2012-03-07T14:44+06:00", "Payload": {"TargetUri": "/x", "JsonBody": "{}"}}`,
		``, `[]`, `{"PercentComplete": "x"}`,
	} {
		f.Add(202, []byte(s))
		f.Add(200, []byte(s))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		task, err := parseTask("/t", status, body)
		if err != nil {
			return
		}
		if task.State == "" {
			t.Errorf("parsed a task without a state from %q", body)
		}
	})
}

// FuzzParseUpdateService: any UpdateService body parses or errors, never
// panics.
func FuzzParseUpdateService(f *testing.F) {
	f.Add([]byte(`{"@odata.id": "/redfish/v1/UpdateService", "HttpPushUri": "/FWUpdate", "MultipartHttpPushUri": "/m",
		"Actions": {"#UpdateService.SimpleUpdate": {"target": "/s", "@Redfish.ActionInfo": "/i", "TransferProtocol@Redfish.AllowableValues": ["HTTP"]},
		"Oem": {"#X.Rollback": {"target": "/r"}}}}`))
	f.Add([]byte(`{"Actions": {"Oem": null}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _, _ = parseUpdateService("/redfish/v1/UpdateService", raw)
	})
}

// FuzzStartAnswer: the answer to an update's start (a Location, a body)
// is read without panicking.
func FuzzStartAnswer(f *testing.F) {
	f.Add(202, "/redfish/v1/TaskService/Tasks/3/Monitor", []byte(`{"@odata.id": "/redfish/v1/TaskService/Tasks/3", "@odata.type": "#Task.v1_7_0.Task", "TaskState": "New"}`))
	f.Add(204, "", []byte(nil))
	f.Add(202, "https://[::1]:x/%zz", []byte(`{`))
	f.Fuzz(func(t *testing.T, status int, loc string, body []byte) {
		resp := &http.Response{StatusCode: status, Header: http.Header{"Location": {loc}}, Body: io.NopCloser(bytes.NewReader(body))}
		st := startAnswer(MethodSimpleUpdate, resp)
		if st.Status != status {
			t.Errorf("status %d read as %s", status, strconv.Itoa(st.Status))
		}
	})
}
