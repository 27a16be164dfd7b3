package submit

import (
	"sort"
	"strings"
)

// IgnoredAttr is a job attribute pond takes but does not act on, and the
// submit command that sets it. HTCondor's clients (condor_submit, the
// htcondor wheel) send a submit's jobs as ads, where the commands of
// IgnoredCommands are these attributes.
type IgnoredAttr struct {
	Attr    string // the job attribute
	Command string // the submit command that sets it
	// QuietFalse: a value of false asks for nothing pond would have done.
	QuietFalse bool
	// Off names the attribute whose file the value false leaves on the
	// execute node (In, Out, Err): TransferIn and the like are False in
	// every job whose file is /dev/null, asked for or not.
	Off string
}

// IgnoredAttrs are the job attributes of IgnoredCommands, as HTCondor's
// submit writes them. The commands that make no attribute in the ads of
// HTCondor's clients (copy_to_spool, job_batch_id, skip_filechecks,
// want_remote_io) are not here.
var IgnoredAttrs = []IgnoredAttr{
	{Attr: "BufferBlockSize", Command: "buffer_block_size"},
	{Attr: "BufferSize", Command: "buffer_size"},
	{Attr: "ContainerImage", Command: "container_image"},
	{Attr: "CoreSize", Command: "coresize"},
	{Attr: "DockerImage", Command: "docker_image"},
	{Attr: "EncryptExecuteDirectory", Command: "encrypt_execute_directory", QuietFalse: true},
	{Attr: "JobMachineAttrs", Command: "job_machine_attrs"},
	{Attr: "JobMachineAttrsHistoryLength", Command: "job_machine_attrs_history_length"},
	{Attr: "LoadProfile", Command: "load_profile", QuietFalse: true},
	{Attr: "NextJobStartDelay", Command: "next_job_start_delay"},
	{Attr: "OutputDestination", Command: "output_destination"},
	{Attr: "PeriodicVacate", Command: "periodic_vacate", QuietFalse: true},
	{Attr: "PreserveRelativePaths", Command: "preserve_relative_paths", QuietFalse: true},
	{Attr: "Requestmemory_fraction", Command: "request_memory_fraction"},
	{Attr: "RunAsOwner", Command: "run_as_owner", QuietFalse: true},
	{Attr: "TransferErr", Command: "transfer_error", Off: "Err"},
	{Attr: "TransferIn", Command: "transfer_input", Off: "In"},
	{Attr: "TransferOut", Command: "transfer_output", Off: "Out"},
	{Attr: "UserLogUseXML", Command: "log_xml", QuietFalse: true},
	{Attr: "WantGracefulRemoval", Command: "want_graceful_removal", QuietFalse: true},
}

// ignoredByName indexes IgnoredAttrs by lower-case attribute name.
var ignoredByName = func() map[string]IgnoredAttr {
	m := make(map[string]IgnoredAttr, len(IgnoredAttrs))
	for _, a := range IgnoredAttrs {
		m[strings.ToLower(a.Attr)] = a
	}
	return m
}()

// IsIgnoredAttr says whether name (in any case) is one of IgnoredAttrs:
// a job ad without one has nothing Ignored reports.
func IsIgnoredAttr(name string) bool {
	_, ok := ignoredByName[strings.ToLower(name)]
	return ok
}

// Ignored returns the attributes of IgnoredAttrs a job asks for, in
// IgnoredAttrs' order. get looks up an attribute of the job's ad by its
// lower-case name and returns its value in ClassAd syntax.
func Ignored(get func(lower string) (string, bool)) []IgnoredAttr {
	var out []IgnoredAttr
	for _, a := range IgnoredAttrs {
		v, ok := get(strings.ToLower(a.Attr))
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		isFalse := strings.EqualFold(v, "false")
		switch {
		case strings.EqualFold(v, "undefined"):
			continue
		case a.QuietFalse && isFalse:
			continue
		case a.Off != "":
			// Only False asks for something (leave the file where the
			// job runs), and only for a file that is not /dev/null.
			f, ok := get(strings.ToLower(a.Off))
			f = strings.Trim(strings.TrimSpace(f), `"`)
			if !isFalse || !ok || f == "" || f == "/dev/null" {
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

// IgnoredText names attrs as "Attr (command)", sorted by attribute and
// comma-separated.
func IgnoredText(attrs []IgnoredAttr) string {
	names := make([]string, 0, len(attrs))
	for _, a := range attrs {
		names = append(names, a.Attr+" ("+a.Command+")")
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
