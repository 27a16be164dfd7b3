package submit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type compatFile struct{ name, text string }

// compatBases begin the corpus's submit files: universes, executables and
// file-transfer modes.
var compatBases = []string{
	"executable = /bin/echo\n",
	"universe = vanilla\nexecutable = run.sh\nlog = job.log\noutput = out.$(Process)\nerror = err.$(Process)\n",
	"universe = local\nexecutable = /bin/sh\n",
	"universe = scheduler\nexecutable = run.sh\n",
	"executable = /bin/echo\nshould_transfer_files = NO\n",
	"universe = vanilla\nexecutable = /bin/echo\nshould_transfer_files = YES\nwhen_to_transfer_output = ON_EXIT\n",
}

// compatFeatures are the submit commands the corpus exercises, each
// combined with two bases. A feature without a queue statement gets
// "queue".
var compatFeatures = []string{
	// arguments, old and new syntax
	"arguments = one two three",
	`arguments = one \"two\" three`,
	`arguments = "one 'two three' four"`,
	`arguments = "a ""quoted"" b"`,
	"arguments =",
	"args = -x $(Process)",
	`arguments = "'$(Cluster).$(Process)' last"`,
	"arguments = $(Process)\nqueue 2",
	// environment, old and new syntax
	"environment = A=1;B=2",
	`environment = "A=1 B='x y' C="`,
	"environment = A=1;B=two",
	"env = X=1",
	`environment = "PATH=/bin:/usr/bin HOME=/tmp"`,
	// transfer lists
	"transfer_input_files = a.txt, b.txt",
	"transfer_input_files = my file.txt, other.txt",
	"transfer_input_files = a.txt,b.txt , c.txt",
	"transfer_output_files = out 1, out2",
	"transfer_output_files = result.dat",
	`transfer_output_remaps = "a = b; c = d"`,
	"should_transfer_files = YES\ntransfer_input_files = in.txt\nwhen_to_transfer_output = ON_EXIT_OR_EVICT",
	"should_transfer_files = IF_NEEDED",
	"input = in.txt\noutput = out.txt\nerror = err.txt\nlog = job.log",
	// requirements and resources
	"requirements = Memory > 1024",
	"requirements = TARGET.GPUs > 0\nrequest_gpus = 1",
	"request_gpus = 2",
	"request_gpus = 0",
	"request_cpus = 4",
	"request_cpus = 2\nrequirements = Cpus >= 2",
	"request_cpus = 2\nrequirements = RequestCpus >= 2",
	"request_memory = 2G\nrequest_disk = 10G",
	"request_memory = 512M",
	"request_disk = 1024",
	`requirements = Disk > 1000 && Arch == "X86_64"`,
	`requirements = OpSys == "LINUX"`,
	"requirements = (HasFileTransfer)",
	`requirements = FileSystemDomain == "x"`,
	"requirements = MY.Memory > 3",
	"rank = Memory",
	"request_memory = $(Process) * 100 + 100\nqueue 2",
	"n = 3\nrequest_cpus = $(n)",
	"n = 4\nm = $INT(n) * 2\nrequest_memory = $(m)",
	// retries and policy
	"max_retries = 3",
	"max_retries = 2\non_exit_remove = ExitCode == 3",
	"on_exit_remove = ExitCode =?= 0",
	"priority = 5",
	"hold = true",
	"periodic_remove = JobStatus == 5 && time() - EnteredCurrentStatus > 3600",
	"on_exit_hold = ExitCode != 0",
	"periodic_release = true",
	"leave_in_queue = JobStatus == 4",
	"job_max_vacate_time = 60",
	// accounting
	"concurrency_limits = foo, Bar:2",
	"concurrency_limits = DB",
	"concurrency_limits = x:1,y,Z",
	"accounting_group = group_a\naccounting_group_user = bob",
	"batch_name = mybatch",
	"nice_user = true",
	// directories and executables
	"initialdir = sub",
	"initialdir = sub\nlog = job.log\ninput = in.txt",
	"executable = rel.sh\ntransfer_executable = false",
	"executable = rel.sh",
	"executable = sub/rel.sh\ntransfer_executable = true",
	// macros
	"x = $ENV(POND_COMPAT_SET)\n+X = \"$(x)\"",
	"x = $ENV(POND_COMPAT_UNSET)\n+X = \"$(x)\"",
	"+X = \"$ENV(POND_COMPAT_UNSET:fallback)\"",
	"+X = \"$(missing:dflt)\"",
	"+X = \"$(Node)\"",
	"+X = \"$(Process)-$(Cluster)-$(Step)\"\nqueue 3",
	"site = campus\nif defined site\n+Site = \"$(site)\"\nelse\n+Site = \"none\"\nendif",
	"if defined site\n+Site = \"$(site)\"\nelse\n+Site = \"none\"\nendif",
	"if version >= 9.0\n+New = true\nendif",
	"include : common.sub",
	"+MyAttr = 42\nMY.Other = \"s\"",
	"description = a job",
	"notification = Complete\nnotify_user = a@b.c",
	"kill_sig = SIGKILL",
	"stream_output = true",
	"next_job_start_delay = 5",
	"max_retries = 4\nsuccess_exit_code = 2",
	"initialdir = missing-dir",
	`arguments = a\\b \"c d\" e`,
	`arguments = "$(missing:x y) $(Process)"`,
	"getenv = POND_COMPAT_*\nenvironment = \"ZZ=1 AA=2\"",
	"getenv = true",
	"concurrency_limits = $(missing:lic) , gpu:2",
	"include : common.sub\nrequest_memory = 512",
	"flavour = big\nif defined flavour\n  request_memory = 4096\nelif defined other\n  request_memory = 1\nendif",
	"if $(Cluster) > 0\n+Big = true\nendif",
	"transfer_input_files = \"c d.txt\", e.txt",
	"requirements = TARGET.HasFileTransfer && FileSystemDomain != \"\"",
	"Executable = /bin/cat\nArguments = x\nREQUEST_MEMORY = 64",
	"# a comment\n\n  request_cpus = 1\n# another",
	"requirements = Memory > 10 && \\\n  Disk > 10",
	"transfer_output_files = a, \"b c\"",
	"accounting_group = physics",
	"request_memory = 1.5G\nrequest_disk = 500M",
	"universe = local\nrequest_gpus = 1",
	"periodic_hold = NumJobStarts > 3\nperiodic_hold_reason = \"too many starts\"\nperiodic_hold_subcode = 42",
	"getenv = false\nenvironment = \"A=1\"",
	"notification = never",
	"MY.Double = $(Process) * 2\nqueue 2",
	"error = /dev/null\noutput = /dev/null",
	"want_graceful_removal = true",
	"allowed_job_duration = 3600\nallowed_execute_duration = 600",
	"+S = \"$(Step)/$(x)\"\nqueue 2 x in (a, b)",
	"+P = \"$INT(Process,%03d)\"\nqueue 2",
	"n = 1\n+C = \"$CHOICE(n, zero, one)\"",
	"arguments = \"--name=$(x)\"\nqueue x from (\n  one\n  two words\n)",
	"on_exit_remove = true\non_exit_hold = false",
	"periodic_remove = (time() - QDate) > 86400",
	"log = logs/$(Cluster).log\ninitialdir = sub",
	"rank = -Memory\nrequirements = Arch == \"X86_64\" || Arch == \"aarch64\"",
	"request_cpus = $(n:2)",
	"next_job_start_delay = $(Process) * 10\nqueue 2",
	"kill_sig = 9\njob_max_vacate_time = 0",
	"universe = vanilla\nshould_transfer_files = NO\nrequirements = TARGET.FileSystemDomain == \"elsewhere\"",
	"requirements = Memory > $(mem:100)",
	"arguments = $(Node) $(missing) $(missing:d)",
	"+X = $(missing:42)\n+Y = $(gone:\"s\")",
	"w = $(missing:x)\nif defined w\n+W = \"$(w)\"\nendif",
	"output = out.$(Node:none)",
	"a = 1\n+Y = \"$(a:'q')|$ENV(POND_COMPAT_SET:'q')|$(gone:x(y))\"",
	"on_exit_hold_reason = plain words",
	"+Z = strcat(\"a\", \"b\") == \"ab\"\nrank = Memory * 2 + Cpus",
	// queue forms
	"+R = \"$(a)-$(b)\"\nqueue a,b from rows.txt",
	"queue 3",
	"+X = \"$(x)\"\nqueue x in (a, b, c)",
	"+N = \"$(name)\"\n+V = $(val)\nqueue name,val from (\n a 1\n b 2\n)",
	"+F = \"$(f)\"\nqueue f matching *.txt",
	"+I = \"$(item)\"\nqueue 2 in (p, q)",
}

// compatCorpus returns the corpus: every feature after two bases.
func compatCorpus() []compatFile {
	var out []compatFile
	for i, f := range compatFeatures {
		for k, b := range []string{compatBases[i%len(compatBases)], compatBases[(i+3)%len(compatBases)]} {
			text := b + f + "\n"
			if !strings.HasPrefix(f, "queue") && !strings.Contains(f, "\nqueue") {
				text += "queue\n"
			}
			out = append(out, compatFile{fmt.Sprintf("f%03d-%d.sub", i, k), text})
		}
	}
	return out
}

// writeCompatCorpus writes the corpus and the files it refers to into dir
// and returns the corpus's file names.
func writeCompatCorpus(t *testing.T, dir string, corpus []compatFile) []string {
	t.Helper()
	files := map[string]string{
		"run.sh": "#!/bin/sh\necho run\n", "rel.sh": "#!/bin/sh\n", "sub/rel.sh": "#!/bin/sh\n",
		"in.txt": "in\n", "a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n", "my file.txt": "m\n", "other.txt": "o\n",
		"sub/in.txt": "in\n",
		"rows.txt":   "r1 x\nr2 y\n",
		"common.sub": "request_memory = 256\n+FromInclude = \"yes\"\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, c := range corpus {
		if err := os.WriteFile(filepath.Join(dir, c.name), []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, c.name)
	}
	return names
}
