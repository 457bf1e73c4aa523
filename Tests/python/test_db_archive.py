"""`/_db export` and `/_db import` through the unmodified `simplex-chat` Python library (7.0.2) on
Swiftplex's libsimplex.so.

A real swiftplex-relay process. Two library Clients, ann and ben, connect by a one-time invitation
and talk. ann stops and exports her databases (`/_db export`), and is closed for good. A new
controller on a fresh database prefix imports the archive (`/_db import`, chat stopped), is closed,
and a Client opened on that prefix is ann again: same user, ben among her contacts. ben writes, the
restored ann receives it and answers, ben gets the answer. Around it, the refusals: export and
import while the chat runs (`chatNotStopped`), import of a file that is not an archive (a typed
error, nothing changed), and any command but `/_stop` after an import (`chatStoreChanged`).

Prints `python db archive: N passed, 0 failed`; exits non-zero on the first failure.
"""

import asyncio
import json
import os
import stat
import sys
import tempfile

from simplex_chat import Client, Profile, SqliteDb
from simplex_chat.api import ChatApi
from simplex_chat.core import ChatAPIError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_python_bot import serve, start_relay, stop  # noqa: E402  (shared helpers)
from harness import check, run


async def chat_error(api, cmd):
    """The chatError type a command is refused with (fails the test if it is not refused)."""
    try:
        r = await api.send_chat_cmd(cmd)
    except ChatAPIError as e:
        err = e.chat_error or {}
        inner = err.get("errorType") or err.get("storeError") or {}
        return inner.get("type") or err.get("type")
    check(False, f"{cmd} was refused (it answered {r.get('type')})")


async def archive(work):
    def db(name):
        return SqliteDb(file_prefix=os.path.join(work, name))

    archive_path = os.path.join(work, "ann-export.zip")
    ann, ben = Client(profile=Profile(display_name="ann"), db=db("ann")), Client(profile=Profile(display_name="ben"), db=db("ben"))
    ben_texts, ann_texts = asyncio.Queue(), asyncio.Queue()
    ben.on_message(content_type="text")(lambda m: ben_texts.put(m))
    ann_connected = asyncio.Queue()
    ann.on_event("contactConnected")(lambda e: ann_connected.put(e))

    async with ben:
        ben_task = await serve(ben)
        async with ann:
            ann_task = await serve(ann)
            link = await ann.api.api_create_link(1)
            await ben.connect_to(link, timeout=60)
            ben_id = (await asyncio.wait_for(ann_connected.get(), 60))["contact"]["contactId"]
            await ann.api.api_send_text_message({"chatType": "direct", "chatId": ben_id}, "before the export")
            m = await asyncio.wait_for(ben_texts.get(), 60)
            check(m.text == "before the export", "ben receives ann's message before the export")

            # Running: both refused, nothing written.
            check(await chat_error(ann.api, "/_db export " + json.dumps({"archivePath": archive_path})) == "chatNotStopped",
                  "/_db export while the chat runs is refused with chatNotStopped")
            check(not os.path.exists(archive_path), "nothing was written")
            check(await chat_error(ann.api, "/_db export {}") == "commandError", "an ArchiveConfig without archivePath is a commandError")

            ann.stop()
            await ann_task
            await ann.api.stop_chat()
            r = await ann.api.send_chat_cmd("/_db export " + json.dumps({"archivePath": archive_path}))
            check(r["type"] == "archiveExported" and r["archiveErrors"] == [], f"/_db export answers archiveExported ({r})")
            check(stat.S_IMODE(os.stat(archive_path).st_mode) == 0o600, "the archive is written 0600")
            await ann.api.start_chat()  # so that the Client's own shutdown finds it running
        # ann is closed for good: only her archive is left to carry her on.

        # A new controller on a new prefix, never started: imports, and is closed.
        api = await ChatApi.init(db("restored"))
        bogus = os.path.join(work, "not-an-archive.zip")
        with open(bogus, "w") as f:
            f.write("hello")
        check(await chat_error(api, "/_db import " + json.dumps({"archivePath": bogus})) == "exception",
              "importing a file that is not an archive is refused (exception), nothing changed")
        r = await api.send_chat_cmd("/users")
        check(r["type"] == "usersList", "the controller still works after a refused import")
        r = await api.send_chat_cmd("/_db import " + json.dumps({"archivePath": archive_path}))
        check(r["type"] == "archiveImported" and r["archiveErrors"] == [], f"/_db import answers archiveImported ({r})")
        check(await chat_error(api, "/users") == "chatStoreChanged", "after an import, commands answer chatStoreChanged")
        r = await api.send_chat_cmd("/_stop")
        check(r["type"] == "chatStopped", "/_stop still answers after an import")
        await api.close()
        for suffix in ("_chat.db", "_agent.db"):
            path = os.path.join(work, "restored" + suffix)
            check(stat.S_IMODE(os.stat(path).st_mode) == 0o600, f"restored{suffix} is 0600")

        # The restored ann: same user, same contact, and the conversation goes on.
        restored = Client(profile=Profile(display_name="ann"), db=db("restored"))
        restored.on_message(content_type="text")(lambda m: ann_texts.put(m))
        async with restored:
            restored_task = await serve(restored)
            contacts = await restored.api.api_list_contacts(1)
            check([c["profile"]["displayName"] for c in contacts] == ["ben"], f"the restored ann has ben as her contact ({contacts})")
            ann_at_ben = next(c["contactId"] for c in await ben.api.api_list_contacts(1) if c["profile"]["displayName"] == "ann")
            await ben.api.api_send_text_message({"chatType": "direct", "chatId": ann_at_ben}, "after the import")
            m = await asyncio.wait_for(ann_texts.get(), 60)
            check(m.text == "after the import", "the restored ann receives ben's message")
            await m.reply("answered from the restored database")
            m = await asyncio.wait_for(ben_texts.get(), 60)
            check(m.text == "answered from the restored database", "ben gets the restored ann's answer")
            check(await chat_error(restored.api, "/_db import " + json.dumps({"archivePath": archive_path})) == "chatNotStopped",
                  "/_db import while the chat runs is refused with chatNotStopped")
            restored.stop()
            await restored_task
        ben.stop()
        await ben_task


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-python-archive-")
    relay, address = start_relay(os.path.join(work, "relay"))
    os.environ["SWIFTPLEX_SERVERS"] = address
    try:
        asyncio.run(archive(work))
    finally:
        stop(relay)


if __name__ == "__main__":
    run("python db archive", main)
