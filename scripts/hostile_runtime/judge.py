"""Runs one case of the runtime's hostile catalogue in its own folder and session, and judges
it (scripts/hostile_runtime_catalogue.py's docstring lists the verdicts).

A case runs either as its command line in a fresh interpreter, or (most: the catalogue would
otherwise spend most of its time importing) in a fork of a preloaded interpreter that has
imported the runtime's command lines and jsonschema: the fork starts its own session, takes
the case's folder, environment, argv and output files, and calls the same main() that
`python -m` calls, with sys.exit's meaning of its result. Both are judged alike.
"""
import hashlib
import json
import os
import re
import select
import signal
import subprocess
import threading
import time

from .cases import MAIN, PYTHON_DIR

TIMEOUT = 60  # a guard against a run that never ends, not a speed target
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s+File \"", re.M)
MODULES = {"run": "pulse_runtime", "profile": "pulse_runtime.profile_cli",
           "torchtitan": "pulse_runtime.torchtitan"}

# The preloaded interpreter: one request (JSON) per line in, the child's pid and then its exit
# status out.
PRELOADED = r'''
import json, os, sys
sys.path.insert(0, sys.argv[1])
from pulse_runtime import cli, profile_cli, torchtitan, plan_json
plan_json._validator()
mains = {"pulse_runtime": cli.main, "pulse_runtime.profile_cli": profile_cli.main,
         "pulse_runtime.torchtitan": torchtitan.main}
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        for fd, name, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            f = os.open(name, flags, 0o644)
            os.dup2(f, fd)
            os.close(f)
        sys.argv = req["argv"]
        try:
            result = mains[req["module"]](req["argv"][1:])
            code = result if isinstance(result, int) else 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)
'''


class Preloaded:
    """A preloaded interpreter that forks one case at a time (module docstring)."""

    def __init__(self, python):
        self.proc = subprocess.Popen([python, "-c", PRELOADED, PYTHON_DIR],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.fd, self.buffer = self.proc.stdout.fileno(), b""

    def _line(self, block):
        """The next line it wrote (None if none is there yet and not `block`)."""
        while b"\n" not in self.buffer:
            if not block and not select.select([self.fd], [], [], 0)[0]:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                raise RuntimeError("the preloaded interpreter ended")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def start(self, request):
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        self.pid = self._line(True)["pid"]
        self.returncode = None
        return self

    def poll(self):
        if self.returncode is None:
            line = self._line(False)
            if line is not None:
                self.returncode = line["status"]
        return self.returncode

    def wait(self):
        while self.poll() is None:
            time.sleep(0.01)
        return self.returncode

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


def session_processes(sid):
    """(pid, parent pid) of the processes whose session is `sid` (the case's command and
    whatever it started, which inherit its session), from /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 3 and int(fields[3]) == sid:
            pids.append((int(entry), int(fields[1])))
    return pids


def started(sid):
    """The command (the session's leader) and the processes it started itself: its ranks.
    What they start in turn (a rank's ldconfig when ctypes looks up libc) is not counted."""
    return 1 + sum(1 for _, parent in session_processes(sid) if parent == sid)


def snapshot(folder):
    """Every file under `folder` by its hash (what a refused command must leave as it was)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in files + dirs:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            if os.path.isfile(path) and not os.path.islink(path):
                st = os.stat(path)
                if st.st_size > (16 << 20):  # the size cases' files: by size and time
                    out[rel] = (st.st_size, st.st_mtime_ns)
                    continue
                with open(path, "rb") as f:
                    out[rel] = hashlib.sha256(f.read()).hexdigest()
            else:
                out[rel] = "dir" if os.path.isdir(path) else "other"
    return out


def command(case, folder, python):
    """The command line of `case` run in `folder`, with its placeholders filled."""
    model = os.path.join(MAIN, "examples", "small_unet.py") + ":build_test"
    head = {"run": ["--plan", "{plan}", "--model", model, "--out", "out"],
            "profile": ["--model", model, "-o", "out.json"],
            "torchtitan": ["--plan", "{plan}", "--csv", "{csv}", "--model", model, "-o", "out"],
            "adapter": ["--plan", "{plan}", "--csv", "{csv}", "--model", model, "--out", "out"]
            }[case.command]
    fill = {"plan": case.plan_path(folder), "csv": case.csv_path(folder)}
    if fill["plan"] == "":  # the case leaves the option out
        head = [a for a, b in zip(head, head[1:] + [""]) if "{plan}" not in (a, b)]
    start = ([python, os.path.join(MAIN, "examples", "torch_pipelining.py")]
             if case.command == "adapter" else [python, "-m", MODULES[case.command]])
    return start + [a.format(**fill) if "{" in a else a for a in head + list(case.args)]


def feed(stream, data):
    try:
        stream.write(data)
    except OSError:
        pass  # the command stopped reading: that is what a limit does
    finally:
        try:
            stream.close()
        except OSError:
            pass


def start(case, cmd, folder, env, out_path, err_path, preloaded):
    """The running case: a fresh interpreter, or a fork of the preloaded one."""
    if not case.fresh and preloaded is not None:
        return preloaded.start(dict(argv=cmd[2:], module=MODULES[case.command], cwd=folder,
                                    env=env, stdout=out_path, stderr=err_path))
    out, err = open(out_path, "wb"), open(err_path, "wb")
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=out, stderr=err,
                            stdin=subprocess.PIPE if case.stdin is not None
                            else subprocess.DEVNULL, start_new_session=True)
    out.close()
    err.close()
    if case.stdin is not None:
        threading.Thread(target=feed, args=(proc.stdin, case.stdin), daemon=True).start()
    return proc


def run(case, folder, python, preloaded=None):
    """Runs the case; returns its result (exit code, stderr, the most processes its session
    held at once, seconds) and the failures found."""
    case.setup(folder)
    cmd = command(case, folder, python)
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR, **case.env)
    for key in case.unset_env:
        env.pop(key, None)
    before = snapshot(folder)
    err_path = folder + ".stderr"
    out_path = folder + ".stdout"
    began = time.monotonic()
    proc = start(case, cmd, folder, env, out_path, err_path, preloaded)
    most, timed_out = 1, False
    while proc.poll() is None:
        most = max(most, started(proc.pid))
        # Past its time, or past its processes (a runtime forking a plan's thousands of ranks
        # is stopped at the first few): the whole session is killed, and the case fails.
        timed_out = time.monotonic() - began > TIMEOUT
        if timed_out or most > case.max_processes:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        time.sleep(0.01)
    seconds = time.monotonic() - began
    left = session_processes(proc.pid)
    if left:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:  # the leader is gone; its session's others by pid
            for pid, _ in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    with open(err_path, "rb") as f:
        stderr = f.read().decode("utf-8", "replace")
    with open(out_path, "rb") as f:
        stdout = f.read().decode("utf-8", "replace")
    fails = judge(case, proc.returncode, stdout, stderr, most, left, timed_out)
    after = snapshot(folder)
    if proc.returncode != 0 and after != before:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        fails.append(f"files written or changed despite exit {proc.returncode}: {changed[:5]}")
    return dict(name=case.name, cls=case.cls, rc=proc.returncode, seconds=seconds,
                processes=most, stderr=stderr.strip(), command=cmd, fails=fails,
                fresh=case.fresh or preloaded is None)


def judge(case, rc, stdout, stderr, most, left, timed_out):
    fails = []
    if timed_out:
        fails.append(f"still running after {TIMEOUT} s: killed")
    if rc != case.expect:
        fails.append(f"exit {rc}, expected {case.expect}")
    if TRACEBACK.search(stderr):
        fails.append("a traceback on stderr")
    lines = stderr.strip().splitlines()
    if len(lines) != 1:
        fails.append(f"{len(lines)} lines on stderr, expected one")
    elif not re.search(case.message, lines[0]):
        fails.append(f"the line does not match {case.message!r}")
    if stdout.strip():
        fails.append(f"stdout not empty: {stdout[:100]!r}")
    if most > case.max_processes:
        fails.append(f"{most} processes at once, at most {case.max_processes} expected")
    if left:
        fails.append(f"{len(left)} process(es) left running after it exited (killed)")
    return fails
