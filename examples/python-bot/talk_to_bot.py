"""Connects to a bot's address with the official Python library, waits for the welcome, then
asks for the squares of a few numbers. Usage: python talk_to_bot.py <bot address>"""

import asyncio
import os
import sys

from simplex_chat import Client, Profile, SqliteDb


async def main(link: str) -> None:
    client = Client(profile=Profile(display_name="tester"), db=SqliteDb(file_prefix=os.environ.get("CLIENT_DB", "./tester")))
    welcome: asyncio.Queue[str] = asyncio.Queue()

    @client.on_message(content_type="text")
    async def on_text(message):
        await welcome.put(message.text or "")

    async with client:
        serving = asyncio.create_task(client.serve_forever())
        await asyncio.sleep(0.2)  # let the receive loop start
        contact = await client.connect_to(link, timeout=60)
        print("connected to", contact["profile"]["displayName"])
        print("welcome:", await asyncio.wait_for(welcome.get(), 30))
        for n in ("5", "12", "seven"):
            reply = await client.send_and_wait(contact["contactId"], n, timeout=30)
            print(f"{n} -> {reply.text}")
        client.stop()
        await serving


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
