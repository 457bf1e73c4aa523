"""A bot that squares numbers, written for the official SimpleX Python library, running on
Swiftplex through libsimplex.so. See README.md in this folder."""

from simplex_chat import Bot, BotCommand, Profile
from bot_db import database  # BOT_DB: an SQLite prefix or a PostgreSQL connection string

bot = Bot(
    profile=Profile(display_name="Squaring bot"),
    db=database("./squaring_bot"),
    welcome="Send me a number and I will square it.",
    commands=[BotCommand("help", "How to use this bot")],
)


@bot.on_command("help")
async def help_command(message, command):
    await message.reply("Send a number, for example 7, and I will answer with its square.")


@bot.on_message(content_type="text")
async def square(message):
    text = (message.text or "").strip()
    try:
        n = float(text)
    except ValueError:
        await message.reply(f"'{text}' is not a number.")
        return
    result = n * n
    await message.reply(str(int(result)) if result.is_integer() else str(result))


if __name__ == "__main__":
    bot.run()
