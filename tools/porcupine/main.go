// Command porcupine checks a netkv history.jsonl for linearizability with
// github.com/anishathalye/porcupine, as an independent cross-check of the
// Python checker in netkv/lincheck (see docs/linearizability.md).
//
// Usage: porcupine [-timeout 60s] [-html out.html] [-reduce=false] history.jsonl
//
// Prints one line and exits 0 ("linearizable"), 1 ("not linearizable ..."),
// 2 (malformed input or usage error: "error: FILE:LINE: ...") or
// 3 ("unknown: timed out ...").
//
// The history is the Jepsen/Knossos-style JSON-lines format: one object per
// line, {"process", "type": invoke|ok|fail|info, "f": read|write, "key",
// "value", "time_ns"}. Semantics, identical to the Python checker:
//   - "fail" operations definitely did not happen and are dropped;
//   - "info" (or never completed) reads constrain nothing and are dropped;
//   - "info" (or never completed) writes get return time = +inf
//     (math.MaxInt64): they may take effect at any point after their
//     invocation, or never (a pending write linearized after every other
//     operation is indistinguishable from one that never happened);
//   - [call, return] intervals are closed, as in porcupine.
//
// Each key is an independent register (initial value null), checked with
// porcupine's partitioned model.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/anishathalye/porcupine"
)

// value is a register value: absent (null) or a string. Comparable with ==.
type value struct {
	present bool
	s       string
}

func (v value) String() string {
	if !v.present {
		return "null"
	}
	return strconv.Quote(v.s)
}

type input struct {
	write bool
	key   string
	value value // the value written (writes only)
}

type output struct {
	value value // the value read (reads only)
}

type meta struct {
	process string
	line    int
	pending bool
}

func partition(history []porcupine.Operation) [][]porcupine.Operation {
	m := make(map[string][]porcupine.Operation)
	for _, op := range history {
		k := op.Input.(input).key
		m[k] = append(m[k], op)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, m[k])
	}
	return out
}

// registerModel: one register per key (partitioned), initial value null;
// a write sets the value, a read must return the current value.
var registerModel = porcupine.Model{
	Partition: partition,
	Init:      func() interface{} { return value{} },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		st := state.(value)
		i := in.(input)
		if i.write {
			return true, i.value
		}
		return out.(output).value == st, st
	},
	Hash: func(state interface{}) uint64 {
		v := state.(value)
		h := fnv.New64a()
		if v.present {
			h.Write([]byte{1})
			h.Write([]byte(v.s))
		}
		return h.Sum64()
	},
	DescribeOperation: func(in, out interface{}) string {
		i := in.(input)
		if i.write {
			return fmt.Sprintf("write(%q, %v)", i.key, i.value)
		}
		return fmt.Sprintf("read(%q) -> %v", i.key, out.(output).value)
	},
	DescribeState: func(state interface{}) string { return state.(value).String() },
	DescribeOperationMetadata: func(m interface{}) string {
		if m == nil {
			return ""
		}
		md := m.(meta)
		s := fmt.Sprintf("process %s, line %d", md.process, md.line)
		if md.pending {
			s += ", outcome unknown"
		}
		return s
	},
}

type record struct {
	Process json.RawMessage `json:"process"`
	Type    *string         `json:"type"`
	F       *string         `json:"f"`
	Key     *string         `json:"key"`
	Value   json.RawMessage `json:"value"`
	TimeNs  json.RawMessage `json:"time_ns"`
}

type openOp struct {
	line  int
	write bool
	key   string
	val   value
	call  int64
}

type parseError struct {
	line int
	msg  string
}

func (e *parseError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

func perr(line int, format string, a ...interface{}) error {
	return &parseError{line, fmt.Sprintf(format, a...)}
}

func parseValue(raw json.RawMessage, line int) (value, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return value{}, nil
	}
	var s string
	if err := json.Unmarshal(t, &s); err != nil {
		return value{}, perr(line, "\"value\" must be a string or null, got %s", string(t))
	}
	return value{true, s}, nil
}

func parseProcess(raw json.RawMessage, line int) (string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return "", perr(line, "missing \"process\"")
	}
	if t[0] == '"' {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return "", perr(line, "bad \"process\": %s", string(t))
		}
		return "s:" + s, nil
	}
	n, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil {
		return "", perr(line, "\"process\" must be an integer or a string, got %s", string(t))
	}
	return "i:" + strconv.FormatInt(n, 10), nil
}

func displayProcess(p string) string {
	if strings.HasPrefix(p, "s:") {
		return strconv.Quote(p[2:])
	}
	return p[2:]
}

func parseTime(raw json.RawMessage, line int) (int64, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return 0, perr(line, "missing \"time_ns\"")
	}
	n, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil || n < 0 || n == math.MaxInt64 {
		return 0, perr(line, "\"time_ns\" must be a non-negative integer below 2^63-1, got %s", string(t))
	}
	return n, nil
}

type stats struct {
	ops, keys, pending, dropped int
}

// readHistory parses and validates the history; the rules mirror
// netkv/lincheck/history.py exactly.
func readHistory(r io.Reader) ([]porcupine.Operation, stats, error) {
	var ops []porcupine.Operation
	var st stats
	open := make(map[string]*openOp)
	last := make(map[string]int64) // last event time per process
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		if !utf8.Valid(text) {
			return nil, st, perr(line, "not UTF-8")
		}
		if text[0] != '{' {
			return nil, st, perr(line, "not a JSON object")
		}
		var rec record
		if err := json.Unmarshal(text, &rec); err != nil {
			return nil, st, perr(line, "invalid JSON: %v", err)
		}
		proc, err := parseProcess(rec.Process, line)
		if err != nil {
			return nil, st, err
		}
		if rec.Type == nil {
			return nil, st, perr(line, "missing \"type\"")
		}
		typ := *rec.Type
		switch typ {
		case "invoke", "ok", "fail", "info":
		default:
			return nil, st, perr(line, "unknown type %q (expected invoke, ok, fail or info)", typ)
		}
		if rec.F == nil {
			return nil, st, perr(line, "missing \"f\"")
		}
		f := *rec.F
		if f != "read" && f != "write" {
			return nil, st, perr(line, "unknown f %q (expected read or write)", f)
		}
		t, err := parseTime(rec.TimeNs, line)
		if err != nil {
			return nil, st, err
		}
		val, err := parseValue(rec.Value, line)
		if err != nil {
			return nil, st, err
		}
		if prev, ok := last[proc]; ok && t < prev {
			return nil, st, perr(line, "time_ns %d goes backwards for process %s (previous event at %d)", t, displayProcess(proc), prev)
		}
		last[proc] = t
		o := open[proc]
		if typ == "invoke" {
			if o != nil {
				return nil, st, perr(line, "second invoke for process %s, whose operation from line %d is still open", displayProcess(proc), o.line)
			}
			if rec.Key == nil {
				return nil, st, perr(line, "missing \"key\"")
			}
			open[proc] = &openOp{line: line, write: f == "write", key: *rec.Key, val: val, call: t}
			continue
		}
		if o == nil {
			return nil, st, perr(line, "%q completion for process %s without an open invoke", typ, displayProcess(proc))
		}
		if (f == "write") != o.write {
			return nil, st, perr(line, "completion f %q does not match the invoke on line %d", f, o.line)
		}
		if rec.Key != nil && *rec.Key != o.key {
			return nil, st, perr(line, "completion key %q does not match the invoke on line %d (%q)", *rec.Key, o.line, o.key)
		}
		delete(open, proc)
		switch typ {
		case "fail":
			st.dropped++
		case "info":
			if o.write {
				ops = append(ops, pendingOp(proc, o))
				st.pending++
			} else {
				st.dropped++
			}
		case "ok":
			in := input{write: o.write, key: o.key, value: o.val}
			out := output{}
			if !o.write {
				out.value = val
			}
			ops = append(ops, porcupine.Operation{
				Input: in, Output: out, Call: o.call, Return: t,
				Metadata: meta{process: displayProcess(proc), line: o.line},
			})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, st, perr(line+1, "read error: %v", err)
	}
	// operations never completed: outcome unknown, like "info"
	procs := make([]string, 0, len(open))
	for p := range open {
		procs = append(procs, p)
	}
	sort.Strings(procs)
	for _, p := range procs {
		o := open[p]
		if o.write {
			ops = append(ops, pendingOp(p, o))
			st.pending++
		} else {
			st.dropped++
		}
	}
	keys := make(map[string]struct{})
	for i := range ops {
		ops[i].ClientId = i // visualization wants distinct small ids; unused by the checker
		keys[ops[i].Input.(input).key] = struct{}{}
	}
	st.ops = len(ops)
	st.keys = len(keys)
	return ops, st, nil
}

func pendingOp(proc string, o *openOp) porcupine.Operation {
	return porcupine.Operation{
		Input:    input{write: true, key: o.key, value: o.val},
		Output:   output{},
		Call:     o.call,
		Return:   math.MaxInt64, // may take effect at any time after the call, or never
		Metadata: meta{process: displayProcess(proc), line: o.line, pending: true},
	}
}

func main() {
	timeout := flag.Duration("timeout", 0, "give up after this long (0: no limit); exit 3")
	html := flag.String("html", "", "write porcupine's HTML visualization to this file")
	reduce := flag.Bool("reduce", true, "simplify pending writes first (same verdict; see reducePending)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: porcupine [-timeout D] [-html OUT] [-reduce=false] history.jsonl\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	path := flag.Arg(0)
	f, err := os.Open(path)
	if err != nil {
		fmt.Printf("error: %v\n", err)
		os.Exit(2)
	}
	ops, st, err := readHistory(f)
	f.Close()
	if err != nil {
		var pe *parseError
		if errors.As(err, &pe) {
			fmt.Printf("error: %s:%d: %s\n", path, pe.line, pe.msg)
		} else {
			fmt.Printf("error: %s: %v\n", path, err)
		}
		os.Exit(2)
	}
	if *reduce {
		ops = reducePending(ops)
	}
	var res porcupine.CheckResult
	if *html == "" {
		res = porcupine.CheckOperationsTimeout(registerModel, ops, *timeout)
	} else {
		var info porcupine.LinearizationInfo
		res, info = porcupine.CheckOperationsVerbose(registerModel, ops, *timeout)
		if err := porcupine.VisualizePath(registerModel, info, *html); err != nil {
			fmt.Fprintf(os.Stderr, "warning: visualization: %v\n", err)
		}
	}
	summary := fmt.Sprintf("%d ops, %d keys, %d pending writes", st.ops, st.keys, st.pending)
	switch res {
	case porcupine.Ok:
		fmt.Printf("linearizable (%s)\n", summary)
		os.Exit(0)
	case porcupine.Illegal:
		fmt.Printf("not linearizable (%s; keys: %s)\n", summary, strings.Join(badKeys(ops), ", "))
		os.Exit(1)
	default:
		fmt.Printf("unknown: timed out after %v (%s)\n", *timeout, summary)
		os.Exit(3)
	}
}

// reducePending simplifies each key's pending writes without changing the
// verdict (exactly as reduce_pending in netkv/lincheck/wgl.py):
//   - a pending write whose value no read of its key returned is dropped (in
//     any linearization no read sits between it and the next write, so it
//     changes nothing; conversely it can always be placed last);
//   - a pending write that is the only write of its (non-null) value, which
//     some read returned, definitely happened before every read of that
//     value: its return time becomes the earliest such read's return (but
//     not below its call).
//
// Otherwise pending writes (return time +inf) make the search exponential in
// their number.
func reducePending(ops []porcupine.Operation) []porcupine.Operation {
	type kv struct {
		key string
		v   value
	}
	writers := make(map[kv]int)
	firstRead := make(map[kv]int64)
	for _, op := range ops {
		in := op.Input.(input)
		if in.write {
			writers[kv{in.key, in.value}]++
		} else {
			k := kv{in.key, op.Output.(output).value}
			if t, ok := firstRead[k]; !ok || op.Return < t {
				firstRead[k] = op.Return
			}
		}
	}
	out := ops[:0:0]
	for _, op := range ops {
		if op.Return == math.MaxInt64 {
			in := op.Input.(input)
			k := kv{in.key, in.value}
			t, read := firstRead[k]
			if !read {
				continue
			}
			n := writers[k]
			if !in.value.present {
				n++ // the initial null counts as a write of null
			}
			if n == 1 {
				if t < op.Call {
					t = op.Call
				}
				op.Return = t
			}
		}
		out = append(out, op)
	}
	return out
}

// badKeys re-checks each key's partition on its own to name the failing ones.
func badKeys(ops []porcupine.Operation) []string {
	single := registerModel
	single.Partition = nil
	var bad []string
	for _, part := range partition(ops) {
		if !porcupine.CheckOperations(single, part) {
			bad = append(bad, strconv.Quote(part[0].Input.(input).key))
		}
	}
	return bad
}
