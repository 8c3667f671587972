"""End-to-end client of Fathom's WebSocket gateway, built on the `websockets` library
(Debian's python3-websockets), so the protocol is exercised by a client no one here wrote.

    python3 wsclient.py SCENARIO URL TOKEN [ARGS...]

Each scenario checks what it can on its own (exit 1 with a message on failure) and prints
one JSON object on stdout for the Go test to compare with the journal.
"""

import array
import asyncio
import fcntl
import json
import socket
import sys
import termios
import urllib.parse

import websockets

TIMEOUT = 30


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def auth(token):
    return {"Authorization": "Bearer " + token}


async def recv(ws):
    return json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))


async def expect(ws, op):
    """Reads frames until one with op; returns it."""
    while True:
        f = await recv(ws)
        if f.get("op") == op:
            return f


async def request(ws, frame, op="ack"):
    await ws.send(json.dumps(frame))
    f = await expect(ws, op)
    if "id" in frame and f.get("id") != frame["id"]:
        fail(f"{op} {f} does not echo id {frame['id']!r}")
    return f


async def follow(ws, session_id, events, until="session_completed", limit=None):
    """Appends event frames of session_id to events until one of type until (or limit
    events); checks deltas' shape."""
    while limit is None or len(events) < limit:
        f = await recv(ws)
        if f["op"] == "delta":
            if f["session_id"] != session_id or not f["call_id"] or "seq" in f:
                fail(f"bad delta {f}")
            continue
        if f["op"] != "event":
            fail(f"unexpected frame {f}")
        if f["session_id"] != session_id:
            fail(f"event of {f['session_id']} on the subscription to {session_id}")
        events.append(f)
        if f["type"] == until:
            return


async def start(ws, goal):
    ack = await request(ws, {"op": "start", "id": "start-1", "goal": goal})
    if ack["request"] != "start" or not ack.get("session_id"):
        fail(f"start ack {ack}")
    return ack["session_id"]


async def scenario_follow(url, token):
    async with websockets.connect(url, extra_headers=auth(token)) as ws:
        sid = await start(ws, "write a haiku about journals")
        await request(ws, {"op": "subscribe", "id": 2, "session_id": sid, "from_seq": 0})
        events = []
        await follow(ws, sid, events)
        tl = await request(ws, {"op": "timeline", "id": "tl", "session_id": sid})
        if tl["result"]["status"] != "SESSION_STATUS_COMPLETED":
            fail(f"timeline {tl}")
        return {"session_id": sid, "events": events}


async def scenario_resume(url, token):
    events = []
    async with websockets.connect(url, extra_headers=auth(token)) as ws:
        sid = await start(ws, "explain virtual actors")
        await request(ws, {"op": "subscribe", "session_id": sid})
        await follow(ws, sid, events, limit=3)
        ws.transport.abort()  # drop the TCP connection: no close handshake
    last = events[-1]["seq"]
    async with websockets.connect(url, extra_headers=auth(token)) as ws:
        await request(ws, {"op": "subscribe", "session_id": sid, "from_seq": last})
        await follow(ws, sid, events)
    return {"session_id": sid, "events": events, "resumed_after": last}


async def scenario_bad(url, token, max_frame):
    codes = []
    async with websockets.connect(url, extra_headers=auth(token)) as ws:
        for frame in [
            '{"op":"start",',  # malformed JSON
            '"just a string"',
            '{"op":"teleport","id":"x"}',  # unknown op
            '{"op":"subscribe"}',  # missing session_id
            '{"op":"state_at","session_id":"s"}',  # missing step_index
            '{"op":"start","goal":"x","extra":1}',  # unknown field
            '{"op":"pause","session_id":"s"}',  # no such session
        ]:
            await ws.send(frame)
            f = await expect(ws, "error")
            if not f.get("message"):
                fail(f"error frame without a message: {f}")
            codes.append(f["code"])
        # The connection is still open and serving.
        await request(ws, {"op": "subscribe", "id": "alive", "session_id": "still-here"})
        await ws.send(json.dumps({"op": "start", "goal": "x" * (max_frame + 1)}))
        try:
            while True:
                await asyncio.wait_for(ws.recv(), TIMEOUT)
        except websockets.exceptions.ConnectionClosed as e:
            return {"codes": codes, "close_code": e.code, "close_reason": e.reason}
    fail("oversize frame did not close the connection")


async def scenario_auth(url, token, read_token):
    out = {}
    for name, headers in [("none", {}), ("wrong", auth("wrong-token"))]:
        try:
            async with websockets.connect(url, extra_headers=headers):
                fail(f"{name}: connected")
        except websockets.exceptions.InvalidStatusCode as e:
            out[name] = e.status_code
    async with websockets.connect(url, extra_headers=auth(read_token)) as ws:
        f = await request(ws, {"op": "start", "id": "w", "goal": "x"}, op="error")
        out["read_start"] = f["code"]
        f = await request(ws, {"op": "subscribe", "id": "r", "session_id": "any"})
        out["read_subscribe"] = f["op"]
    # Browsers cannot set headers: the token rides in Sec-WebSocket-Protocol.
    async with websockets.connect(url, subprotocols=["fathom.v1", "bearer." + token]) as ws:
        out["subprotocol"] = ws.subprotocol
        f = await request(ws, {"op": "subscribe", "id": "p", "session_id": "any"})
        out["subprotocol_subscribe"] = f["op"]
    return out


def unread(sock):
    """The bytes the kernel holds for sock that nobody has read yet (FIONREAD)."""
    n = array.array("i", [0])
    fcntl.ioctl(sock.fileno(), termios.FIONREAD, n)
    return n[0]


async def stalled(sock, quiet=1.0):
    """Waits until the server's writes to sock are blocked: bytes wait unread and no more
    have come for quiet seconds (longer than the server's slow-consumer timeout), however
    long the server takes to fill the buffers."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TIMEOUT
    last, since = -1, loop.time()
    while loop.time() < deadline:
        await asyncio.sleep(0.05)
        n = unread(sock)
        if n != last:
            last, since = n, loop.time()
        elif n > 0 and loop.time() - since >= quiet:
            return
    fail(f"the server never stopped writing ({last} bytes unread)")


async def scenario_slow(url, token, stream, count):
    count = int(count)
    seqs = []
    # max_queue=1 and a small read_limit: the library stops reading the socket while
    # we wait, so the server's writes block. A fixed receive buffer: left to the kernel,
    # it grows up to net.ipv4.tcp_rmem's maximum (32 MiB on some hosts), enough to hold
    # the whole stream of a client that does not read, and the server's writes never block.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    parts = urllib.parse.urlsplit(url)
    sock.connect((parts.hostname, parts.port))
    async with websockets.connect(url, sock=sock, extra_headers=auth(token), max_queue=1, read_limit=4096, write_limit=4096) as ws:
        await ws.send(json.dumps({"op": "subscribe", "session_id": stream}))
        await stalled(sock)
        try:
            while True:
                f = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                if f["op"] == "event":
                    seqs.append(f["seq"])
        except websockets.exceptions.ConnectionClosed as e:
            code, reason = e.code, e.reason
    first = len(seqs)
    last = seqs[-1] if seqs else 0
    async with websockets.connect(url, extra_headers=auth(token)) as ws:
        await request(ws, {"op": "subscribe", "session_id": stream, "from_seq": last})
        while len(seqs) < count:
            f = await recv(ws)
            if f["op"] == "event":
                seqs.append(f["seq"])
    return {"close_code": code, "close_reason": reason, "before_close": first, "seqs": seqs}


async def scenario_human(url, token):
    """Answers an ask_human over the WebSocket (a bad answer first: an error frame, the
    connection and the request stay), then forks the finished session after its first
    step and follows the fork to its end."""
    out = {}
    async with websockets.connect(url, extra_headers=auth(token)) as ws:
        sid = await start(ws, "choose a colour")
        await request(ws, {"op": "subscribe", "id": "sub", "session_id": sid, "deltas": False})
        events = []
        await follow(ws, sid, events, until="hitl_requested")
        asked = events[-1]
        if asked["kind"] != "tool" or asked["options"] != ["red", "blue"] or not asked["request_id"]:
            fail(f"hitl_requested {asked}")
        bad = await request(ws, {"op": "input", "id": "bad", "session_id": sid, "step_id": asked["step_id"], "input": "green"}, op="error")
        out["bad_code"], out["bad_message"] = bad["code"], bad["message"]
        await ws.send(json.dumps({"op": "input", "id": "good", "session_id": sid, "step_id": asked["step_id"],
                                  "request_id": asked["request_id"], "input": "blue"}))
        # The ack and the events the answer causes arrive in any order.
        acked = done = False
        while not (acked and done):
            try:
                f = await recv(ws)
            except asyncio.TimeoutError:
                fail(f"after the answer: acked={acked}, events {[e['type'] for e in events]}")
            if f["op"] == "ack" and f.get("id") == "good":
                acked = True
            elif f["op"] == "event":
                events.append(f)
                done = f["type"] == "session_completed"
            elif f["op"] != "delta":
                fail(f"unexpected frame {f}")
        out["session_id"], out["events"] = sid, events
        fork = await request(ws, {"op": "fork", "id": "fork", "session_id": sid, "step_index": 1})
        fid = fork["session_id"]
        if fid == sid or fork["result"]["session_id"] != fid:
            fail(f"fork ack {fork}")
        await request(ws, {"op": "subscribe", "id": "subf", "session_id": fid, "from_seq": 0, "deltas": False})
        fevents = []
        await follow(ws, fid, fevents)
        out["fork_id"], out["fork_events"] = fid, fevents
    return out


SCENARIOS = {
    "human": scenario_human,
    "follow": scenario_follow,
    "resume": scenario_resume,
    "bad": lambda url, token, n: scenario_bad(url, token, int(n)),
    "auth": scenario_auth,
    "slow": scenario_slow,
}


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in SCENARIOS:
        fail(__doc__)
    out = asyncio.run(SCENARIOS[sys.argv[1]](*sys.argv[2:]))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
