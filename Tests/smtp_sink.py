#!/usr/bin/env python3
"""A real SMTP server for the tests (aiosmtpd), writing every accepted message to a folder.

    smtp_sink.py FOLDER

Writes the port it listens on to FOLDER/port once ready. Each accepted message becomes
FOLDER/<n>.eml: three lines X-Sink-Mail-From / X-Sink-Rcpt-To / X-Sink-Peer (the client's
port, which names its connection), then the bytes received.
The recipient's local part steers the answer, so one sink serves every test:
  reject*   550 at RCPT (permanent failure)
  tempfail* 451 at DATA the first time a Message-ID is seen, 250 after
  busy*     421 at RCPT the first time the address is seen (the server takes no mail now), 250 after
  slow*     accepted after 0.3 s (to kill a worker mid-batch)
  pace*     accepted after 0.15 s (a slow server: batches outlast short leases)
  anything else 250
"""
import asyncio
import os
import re
import socket
import sys
import time

from aiosmtpd.controller import Controller


class Sink:
    def __init__(self, folder):
        self.folder = folder
        self.seen = set()
        self.count = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.split("@")[0].startswith("reject"):
            return "550 5.1.1 No such mailbox here"
        if address.split("@")[0].startswith("busy") and address not in self.seen:
            self.seen.add(address)
            return "421 4.7.0 Too many connections, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        data = envelope.original_content or envelope.content
        match = re.search(rb"^Message-ID:\s*(\S+)", data, re.IGNORECASE | re.MULTILINE)
        message_id = match.group(1) if match else b""
        recipient = envelope.rcpt_tos[0] if envelope.rcpt_tos else ""
        local = recipient.split("@")[0]
        if local.startswith("tempfail") and message_id not in self.seen:
            self.seen.add(message_id)
            return "451 4.3.0 Try again later"
        if local.startswith("slow"):
            await asyncio.sleep(0.3)
        if local.startswith("pace"):
            await asyncio.sleep(0.15)
        self.count += 1
        name = "%d-%06d" % (time.time_ns(), self.count)
        head = b"X-Sink-Mail-From: %s\r\nX-Sink-Rcpt-To: %s\r\nX-Sink-Peer: %d\r\n" % (
            envelope.mail_from.encode(), ",".join(envelope.rcpt_tos).encode(), session.peer[1])
        temporary = os.path.join(self.folder, name + ".tmp")
        with open(temporary, "wb") as handle:
            handle.write(head + data)
        os.rename(temporary, os.path.join(self.folder, name + ".eml"))
        return "250 OK queued"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main():
    folder = sys.argv[1]
    os.makedirs(folder, exist_ok=True)
    # A free port can be taken by another process before we bind it (tests start many
    # servers at once): try a few.
    for attempt in range(20):
        port = free_port()
        controller = Controller(Sink(folder), hostname="127.0.0.1", port=port, data_size_limit=10 * 1024 * 1024)
        try:
            controller.start()
            break
        except OSError:
            if attempt == 19:
                raise
    with open(os.path.join(folder, "port.tmp"), "w") as handle:
        handle.write(str(port))
    os.rename(os.path.join(folder, "port.tmp"), os.path.join(folder, "port"))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
