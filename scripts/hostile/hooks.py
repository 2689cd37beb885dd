"""How the second catalogue runs a command when a plain subprocess.run cannot say what it
needs to: stdout or stderr sent to a file, a device or a closed pipe, a signal sent while
the command waits on a named pipe, a file-size limit; and the checks it adds afterwards
(no raw control byte in an output, a plan that validate accepts)."""
import os
import re
import resource
import signal
import stat
import subprocess
import threading
import time

from .common import cfg


class Ran:
    """What a run hook returns: subprocess.CompletedProcess's three fields."""

    def __init__(self, returncode, stdout=b'', stderr=b''):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def direct(cmd):
    """The binary and its arguments without `nice -n 10 timeout N` (a signal must reach it)."""
    return cmd[cmd.index('timeout') + 2:] if cmd[:1] == ['nice'] else cmd


def no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def wait(p, seconds):
    try:
        out, err = p.communicate(timeout=seconds)
        return Ran(p.returncode if p.returncode >= 0 else 128 - p.returncode, out or b'',
                   err or b'')
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return Ran(124, out or b'', err or b'')


# ---------------------------------------------------------------- where stdout and stderr go
def redirect(stream, path, case_dir=True):
    """`stream` ('stdout' or 'stderr') to the file `path`, in the case directory (as `> path`
    would) or, with case_dir False, a device such as /dev/full; the other stream captured."""
    def run(cmd, d, c):
        with open(os.path.join(d, path) if case_dir else path, 'wb') as f:
            streams = {'stdout': subprocess.PIPE, 'stderr': subprocess.PIPE, stream: f}
            p = subprocess.Popen(cmd, cwd=d, stdin=subprocess.DEVNULL, **streams)
            return wait(p, c['timeout'])
    return run


def stdout_to(name):
    return redirect('stdout', name)


def stderr_to(name):
    return redirect('stderr', name)


def stdout_device(path):
    return redirect('stdout', path, case_dir=False)


def stderr_device(path):
    return redirect('stderr', path, case_dir=False)


def stdout_closed(cmd, d, c):
    """Descriptor 1 closed (`>&-`)."""
    p = subprocess.Popen(cmd, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, preexec_fn=lambda: os.close(1))
    return wait(p, c['timeout'])


def reader_gone(stream):
    """`stream` a pipe whose reader is gone before anything is written (`| true`); the child
    gets the default SIGPIPE action, as from a shell."""
    def run(cmd, d, c):
        r, w = os.pipe()
        streams = {'stdout': subprocess.PIPE, 'stderr': subprocess.PIPE, stream: w}
        p = subprocess.Popen(cmd, cwd=d, stdin=subprocess.DEVNULL, **streams)
        os.close(w)
        os.close(r)
        return wait(p, c['timeout'])
    return run


stdout_pipe_closed = reader_gone('stdout')
stderr_pipe_closed = reader_gone('stderr')


def file_size_limit(limit):
    """`ulimit -f`: a write past `limit` bytes raises SIGXFSZ (or fails with EFBIG)."""
    def run(cmd, d, c):
        def pre():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            no_core()
        p = subprocess.Popen(direct(cmd), cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, preexec_fn=pre)
        return wait(p, c['timeout'])
    return run


# ---------------------------------------------------------------- signals and named pipes
def temporaries(d):
    return [f for f in os.listdir(d) if '.tmp-' in f]


def signal_when(sig, ready='temporary', after_s=0.0, ignore_int=False):
    """Sends `sig` to the command once it is waiting with a temporary written (`ready`
    'temporary': it blocks opening a named pipe nobody reads), or after `after_s` seconds
    ('time': in the middle of planning). `ignore_int`: SIGINT ignored from the start, as for
    a background job or under nohup; the command must finish as if nothing was sent."""
    def run(cmd, d, c):
        def pre():
            no_core()
            if ignore_int:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
        p = subprocess.Popen(direct(cmd), cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, preexec_fn=pre)
        start = time.time()
        deadline = start + c['timeout']
        while p.poll() is None and time.time() < deadline:
            if ready == 'temporary' and temporaries(d):
                break
            if ready == 'time' and time.time() > start + after_s:
                break
            time.sleep(0.02)
        if p.poll() is None:
            time.sleep(0.1)  # well inside the blocking open
            p.send_signal(sig)
        if ignore_int:
            unblock_fifos(d)
        return wait(p, max(1, deadline - time.time()))
    return run


def unblock_fifos(d):
    """Opens every named pipe in d for reading and drains it (the command may finish)."""
    for f in os.listdir(d):
        path = os.path.join(d, f)
        if os.path.exists(path) and stat_is_fifo(path):
            threading.Thread(target=drain, args=(path, None), daemon=True).start()


def stat_is_fifo(path):
    return stat.S_ISFIFO(os.stat(path).st_mode)


def drain(path, sink):
    with open(path, 'rb') as f:
        data = f.read()
    if sink is not None:
        sink.append(data)


def fifo_reader(fifo, keep):
    """A reader on the named pipe `fifo` (made by the setup) for the whole run; what it read
    is written to `keep` in the case directory afterwards (an output of the case)."""
    def run(cmd, d, c):
        got = []
        t = threading.Thread(target=drain, args=(os.path.join(d, fifo), got), daemon=True)
        t.start()
        p = subprocess.Popen(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        r = wait(p, c['timeout'])
        t.join(5)
        with open(os.path.join(d, keep), 'wb') as f:
            f.write(got[0] if got else b'')
        return r
    return run


def fifo_writer(fifo, data):
    """A writer that feeds `data` into the named pipe `fifo` (an input of the command)."""
    def run(cmd, d, c):
        def feed():
            with open(os.path.join(d, fifo), 'wb') as f:
                f.write(data)
        t = threading.Thread(target=feed, daemon=True)
        t.start()
        p = subprocess.Popen(cmd, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        return wait(p, c['timeout'])
    return run


# ---------------------------------------------------------------- checks after the run
RAW_CONTROL = re.compile(rb'[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\xae\xab\xac\xad\xaa]')
# JSON escapes the ASCII controls; other characters are data it keeps as they are.
RAW_CONTROL_JSON = re.compile(rb'[\x00-\x08\x0b-\x1f]')
TERMINAL_SEQUENCES = (b'\x1b[1m', b'\x1b[0m', b'\x1b[32m', b'\x1b[31m', b'\x1b[33m')


def raw_controls(data, allow_colors=False, json_file=False):
    """The first control byte (other than tab and newline) or C1 / bidi override in data."""
    if allow_colors:
        for s in TERMINAL_SEQUENCES:
            data = data.replace(s, b'')
    m = (RAW_CONTROL_JSON if json_file else RAW_CONTROL).search(data)
    return None if not m else data[max(0, m.start() - 30):m.end() + 30]


def no_raw_controls(files=(), stdout=True, stderr=True, colors=False):
    """Fails the case when a listed file, stdout or stderr holds a raw control byte."""
    def post(d, r, fails, quest):
        streams = [('stdout', r.stdout)] if stdout else []
        streams += [('stderr', r.stderr)] if stderr else []
        for name in files:
            p = os.path.join(d, name)
            if os.path.isfile(p):
                streams.append((name, open(p, 'rb').read()))
        for name, data in streams:
            bad = raw_controls(data, allow_colors=colors and name == 'stdout',
                               json_file=name.endswith('.json'))
            if bad is not None:
                fails.append('raw control byte in %s: %r' % (name, bad))
    return post


def plan_validates(plan, model, cluster):
    """The plan the case wrote passes validate and simulate --check (the planner's own output
    must never be refused by its checker)."""
    def post(d, r, fails, quest):
        if r.returncode != 0 or not os.path.exists(os.path.join(d, plan)):
            return
        for args in (['validate', plan, '--model', model, '--cluster', cluster],
                     ['simulate', plan, '--check']):
            v = subprocess.run([cfg.bin] + args, cwd=d, capture_output=True)
            if v.returncode != 0:
                fails.append('%s refuses the plan written (exit %d): %s' % (
                    args[0], v.returncode, (v.stdout + v.stderr).decode(errors='replace')[-600:]))
    return post


def link_kept(link, target, contains):
    """`link` is still a symbolic link to `target`, which now holds `contains`."""
    def post(d, r, fails, quest):
        p = os.path.join(d, link)
        if not os.path.islink(p) or os.readlink(p) != target:
            fails.append('%s is no longer a link to %s' % (link, target))
        t = os.path.join(d, target) if not target.startswith('/') else target
        if contains and r.returncode == 0 and (not os.path.isfile(t) or
                                               contains not in open(t, 'rb').read()):
            fails.append('%s does not hold what was written through %s' % (target, link))
    return post


def dev_links_kept(d, r, fails, quest):
    """The runner checks (and restores) /dev/stdout, /dev/stderr and /dev/stdin after every
    case (runner.judge_dev_links); cases that write through them name this as their check."""


def file_holds(name, contains, then=None):
    def post(d, r, fails, quest):
        p = os.path.join(d, name)
        if r.returncode == 0 and (not os.path.isfile(p) or contains not in open(p, 'rb').read()):
            fails.append('%s does not hold %r' % (name, contains))
        dev_links_kept(d, r, fails, quest)
        if then:
            then(d, r, fails, quest)
    return post


def all_of(*posts):
    def post(d, r, fails, quest):
        for p in posts:
            p(d, r, fails, quest)
    return post
