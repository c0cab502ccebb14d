package openclaw

import (
	"errors"
	"reflect"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

func TestCronAddCommand(t *testing.T) {
	base := []string{"cron", "add", "--json", "--name=daily", "--declaration-key=operator:daily"}
	for _, tc := range []struct {
		name string
		task engine.Task
		want []string
	}{
		{"cron agentTurn", engine.Task{Name: "daily", Enabled: true,
			Schedule: engine.Schedule{Kind: "cron", Expr: "0 9 * * 1-5", TZ: "Europe/Berlin"},
			Payload:  engine.Payload{Kind: "agentTurn", Message: "Write the daily report"}},
			[]string{"--cron=0 9 * * 1-5", "--tz=Europe/Berlin", "--message=Write the daily report", "--no-deliver"}},
		{"every systemEvent (no --no-deliver: main session)", engine.Task{Name: "daily", Enabled: true,
			Schedule: engine.Schedule{Kind: "every", EveryMs: 600000},
			Payload:  engine.Payload{Kind: "systemEvent", Text: "ping check"}},
			[]string{"--every=600000ms", "--system-event=ping check"}},
		{"at, disabled, message starting with a dash", engine.Task{Name: "daily",
			Schedule: engine.Schedule{Kind: "at", At: "2027-01-01T10:00:00", TZ: "America/New_York"},
			Payload:  engine.Payload{Kind: "agentTurn", Message: "--help me"}},
			[]string{"--at=2027-01-01T10:00:00", "--tz=America/New_York", "--message=--help me", "--no-deliver", "--disabled"}},
		{"kind inferred", engine.Task{Name: "daily", Enabled: true,
			Schedule: engine.Schedule{EveryMs: 1500}, Payload: engine.Payload{Message: "hi"}},
			[]string{"--every=1500ms", "--message=hi", "--no-deliver"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New().CronAddCommand(tc.task)
			if err != nil {
				t.Fatal(err)
			}
			if want := append(append([]string{}, base...), tc.want...); !reflect.DeepEqual(c.Args, want) {
				t.Fatalf("args\n got %q\nwant %q", c.Args, want)
			}
			if c.Timeout <= 0 {
				t.Fatal("no timeout")
			}
		})
	}
	for _, tc := range []struct {
		name string
		task engine.Task
	}{
		{"no name", engine.Task{Schedule: engine.Schedule{Kind: "every", EveryMs: 1}, Payload: engine.Payload{Message: "x"}}},
		{"control char in name", engine.Task{Name: "a\nb", Schedule: engine.Schedule{Kind: "every", EveryMs: 1}, Payload: engine.Payload{Message: "x"}}},
		{"no schedule", engine.Task{Name: "n", Payload: engine.Payload{Message: "x"}}},
		{"two schedules", engine.Task{Name: "n", Schedule: engine.Schedule{Expr: "* * * * *", EveryMs: 5}, Payload: engine.Payload{Message: "x"}}},
		{"cron without expr", engine.Task{Name: "n", Schedule: engine.Schedule{Kind: "cron"}, Payload: engine.Payload{Message: "x"}}},
		{"every 0", engine.Task{Name: "n", Schedule: engine.Schedule{Kind: "every"}, Payload: engine.Payload{Message: "x"}}},
		{"unknown kind", engine.Task{Name: "n", Schedule: engine.Schedule{Kind: "on-exit"}, Payload: engine.Payload{Message: "x"}}},
		{"empty message", engine.Task{Name: "n", Schedule: engine.Schedule{Kind: "every", EveryMs: 5}, Payload: engine.Payload{Kind: "agentTurn"}}},
		{"unknown payload", engine.Task{Name: "n", Schedule: engine.Schedule{Kind: "every", EveryMs: 5}, Payload: engine.Payload{Kind: "script", Message: "x"}}},
	} {
		if _, err := New().CronAddCommand(tc.task); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("%s: err = %v, want ErrInvalidInput", tc.name, err)
		}
	}
}

func TestParseCronAdd(t *testing.T) {
	for _, tc := range []struct {
		file string
		want engine.Task
	}{
		{"cron-add-created.json", engine.Task{ID: "72a2664c-6aad-4dc8-81d0-b5cba95aaa4e", Name: "daily", Enabled: true,
			Schedule:  engine.Schedule{Kind: "cron", Expr: "0 9 * * 1-5", TZ: "Europe/Berlin"},
			Payload:   engine.Payload{Kind: "agentTurn", Message: "Write the report"},
			NextRunAt: "2026-11-23T08:00:00.000Z", CreatedAt: "2026-11-22T03:24:08.519Z"}},
		{"cron-add-updated.json", engine.Task{ID: "72a2664c-6aad-4dc8-81d0-b5cba95aaa4e", Name: "daily", Enabled: true,
			Schedule:  engine.Schedule{Kind: "cron", Expr: "0 10 * * *"},
			Payload:   engine.Payload{Kind: "agentTurn", Message: "Write the report v2"},
			NextRunAt: "2026-11-22T10:00:00.000Z", CreatedAt: "2026-11-22T03:24:08.519Z"}},
		{"cron-add-every.json", engine.Task{ID: "20f9f9e0-3281-471d-8054-c863bb750c0f", Name: "ev", Enabled: true,
			Schedule:  engine.Schedule{Kind: "every", EveryMs: 90000},
			Payload:   engine.Payload{Kind: "systemEvent", Text: "ping"},
			NextRunAt: "2026-11-22T03:25:44.533Z", CreatedAt: "2026-11-22T03:24:14.533Z"}},
		{"cron-add-at-disabled.json", engine.Task{ID: "f2d1fef7-80a2-4e3d-afc3-1925c5543a48", Name: "once", Enabled: false,
			Schedule:  engine.Schedule{Kind: "at", At: "2027-01-01T10:00:00.000Z"},
			Payload:   engine.Payload{Kind: "agentTurn", Message: "Happy new year"},
			CreatedAt: "2026-11-22T03:24:21.657Z"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := New().ParseCronAdd(golden(t, tc.file), 0)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	// A bare job (no declaration key) is accepted too.
	bare := `{"id":"366749d9","name":"x","enabled":true,"schedule":{"kind":"every","everyMs":600000},"payload":{"kind":"systemEvent","text":"t"}}`
	if got, err := New().ParseCronAdd([]byte(bare), 0); err != nil || got.ID != "366749d9" || got.Schedule.EveryMs != 600000 {
		t.Fatalf("bare job: %+v %v", got, err)
	}
	for _, tc := range []struct {
		out  string
		exit int
	}{
		{string(golden(t, "cron-add-bad-pattern.json")), 1},
		{string(golden(t, "cron-list-gateway-down.json")), 1},
		{"", 1},
		{"{}", 0},
		{"not json", 0},
	} {
		if _, err := New().ParseCronAdd([]byte(tc.out), tc.exit); !errors.Is(err, engine.ErrCLI) {
			t.Errorf("ParseCronAdd(%.40q, %d) err = %v, want ErrCLI", tc.out, tc.exit, err)
		}
	}
}

func TestParseCronList(t *testing.T) {
	if c := New().CronListCommand(); !reflect.DeepEqual(c.Args, []string{"cron", "list", "--json", "--all"}) || c.Timeout <= 0 {
		t.Fatalf("CronListCommand = %+v", c)
	}
	tasks, err := New().ParseCronList(golden(t, "cron-list.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	// The real list has 6 jobs: heartbeat:main, memory-core:..., skill-collection-review:main
	// (OpenClaw's own) and operator:ev, operator:daily, operator:once (ours), in that order.
	var names []string
	for _, tk := range tasks {
		names = append(names, tk.Name)
	}
	if !reflect.DeepEqual(names, []string{"ev", "daily", "once"}) {
		t.Fatalf("names = %v", names)
	}
	if tasks[2].Enabled || !tasks[0].Enabled || tasks[1].Schedule.Expr != "0 10 * * *" {
		t.Fatalf("tasks = %+v", tasks)
	}
	if tasks[0].Running || tasks[1].Running || tasks[2].Running {
		t.Fatalf("idle jobs read as running: %+v", tasks)
	}
	running, err := New().ParseCronList([]byte(`{"jobs":[{"id":"j1","declarationKey":"operator:r","name":"r","enabled":true,`+
		`"schedule":{"kind":"at","at":"2026-11-29T10:00:00.000Z"},"payload":{"kind":"agentTurn","message":"m"},`+
		`"state":{"runningAtMs":1795317854533},"status":"running"}]}`), 0)
	if err != nil || len(running) != 1 || !running[0].Running || running[0].NextRunAt != "" {
		t.Fatalf("a running job: %+v %v", running, err)
	}
	empty, err := New().ParseCronList([]byte(`{"jobs":[],"total":0}`), 0)
	if err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("empty list: %#v %v", empty, err)
	}
	for _, tc := range []struct {
		out  string
		exit int
	}{
		{string(golden(t, "cron-list-gateway-down.json")), 1},
		{`{"ok":false,"error":{"message":"x"}}`, 0},
		{`{"total":0}`, 0},
		{"", 0},
	} {
		if _, err := New().ParseCronList([]byte(tc.out), tc.exit); !errors.Is(err, engine.ErrCLI) {
			t.Errorf("ParseCronList(%.40q, %d) err = %v, want ErrCLI", tc.out, tc.exit, err)
		}
	}
}
