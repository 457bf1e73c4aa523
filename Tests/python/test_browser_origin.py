"""End-to-end, in a real browser: a web page the operator visits cannot drive a bot through a
WebSocket API that has no token (headless Chromium driven by Selenium through chromium-driver).

Starts a real swiftplex-relay and `swiftplex-chat -p 0` on loopback without a token, allowing one
browser origin (--ws-allow-origin). Two pages are served from other loopback ports: a hostile
one, whose script opens ws://127.0.0.1:PORT and sends a command, and the allowed one, with the
same script. The hostile page's socket never opens and its command is never answered; the
allowed page, loaded after it, gets its answer, which shows the hostile one would have got one
too. Then DNS rebinding: Chromium resolves rebind.test to 127.0.0.1, so a page at
http://rebind.test:PORT is same-origin with the API; the API refuses its Host (403) and its
WebSocket. Finally a plain client without Origin (as SimpleX's are) is served.

Run by `make python-test` with SIMPLEX_LIBS_DIR set to the build directory. Prints
`python-browser-origin: N passed, 0 failed` and exits non-zero on the first failure.
"""

import http.server
import os
import shutil
import socketserver
import subprocess
import tempfile
import threading

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

import test_ws_api as support
from harness import BIN, TIMEOUT, check, run, start_relay, started, stop

# The page: opens the API, sends one command, and writes what happened into the title.
PAGE = """<!doctype html><title>loading</title><script>
const ws = new WebSocket("ws://127.0.0.1:%d/");
let opened = false;
ws.onopen = () => { opened = true; document.title = "open"; ws.send(JSON.stringify({corrId: "page", cmd: "/user"})); };
ws.onmessage = (m) => { if (JSON.parse(m.data).corrId === "page") document.title = "answered"; };
ws.onerror = () => { if (!opened) document.title = "refused"; };
ws.onclose = () => { if (!opened) document.title = "refused"; };
</script>"""


def serve_page(body, port=0):
    """Serves `body` at / on a loopback port (0: a free one), on a thread; returns the port."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 — http.server's name
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    socketserver.TCPServer.allow_reuse_address = True
    server = socketserver.TCPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    started.append(type("Stop", (), {"kill": lambda self: server.shutdown()})())
    return server.server_address[1]


def free_port():
    with socketserver.TCPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler) as s:
        return s.server_address[1]


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--host-resolver-rules=MAP rebind.test 127.0.0.1"):
        options.add_argument(arg)
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    started.append(type("Quit", (), {"kill": lambda self: driver.quit()})())
    return driver


def title_after_load(driver, url):
    driver.get(url)
    WebDriverWait(driver, TIMEOUT).until(lambda d: d.title in ("refused", "answered"))
    return driver.title


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-origin-")
    relay_process, relay = start_relay(os.path.join(work, "relay"))
    allowed_port = free_port()
    chat = subprocess.Popen([os.path.join(BIN, "swiftplex-chat"), "--data-dir", os.path.join(work, "bot"), "--server", relay,
                             "--name", "bot", "-p", "0", "--ws-allow-origin", f"http://127.0.0.1:{allowed_port}"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started.append(chat)
    port = int(support.Lines(chat.stderr).wait_for(r"WebSocket API listening on 127\.0\.0\.1:(\d+)", "the WebSocket API listens").group(1))

    hostile = serve_page(PAGE % port)
    driver = browser()
    check(title_after_load(driver, f"http://127.0.0.1:{hostile}/") == "refused",
          "a page from another origin cannot open the tokenless WebSocket API")

    # The allowed origin: the same script on the port the API was told to allow.
    serve_page(PAGE % port, allowed_port)
    check(title_after_load(driver, f"http://127.0.0.1:{allowed_port}/") == "answered",
          "a page from the allowed origin opens the API and gets its answer (so the refused page would have)")

    # DNS rebinding: the page's name resolves to 127.0.0.1 and it is same-origin with the API.
    driver.get(f"http://rebind.test:{port}/")
    body = driver.find_element("tag name", "body").text
    check("forbidden" in body and "rebind.test" in body, f"a page at http://rebind.test:{port} is refused by its Host ({body[:120]!r})")
    driver.execute_script(f"""
        document.title = "loading";
        const ws = new WebSocket("ws://rebind.test:{port}/");
        let opened = false;
        ws.onopen = () => {{ opened = true; document.title = "answered"; }};
        ws.onerror = () => {{ if (!opened) document.title = "refused"; }};
        ws.onclose = () => {{ if (!opened) document.title = "refused"; }};
    """)
    WebDriverWait(driver, TIMEOUT).until(lambda d: d.title in ("refused", "answered"))
    check(driver.title == "refused", "a rebound page cannot open the WebSocket API under its own name")

    # A client without Origin, as SimpleX's are, is served.
    session = support.Session(f"ws://127.0.0.1:{port}/")
    answer = session.command("/user")
    check(answer.get("type") == "activeUser", "a client without Origin is served")
    driver.quit()
    session.ws.close()
    stop(chat)
    stop(relay_process)


if __name__ == "__main__":
    run("python-browser-origin", main)
