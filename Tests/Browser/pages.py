"""Drives Debian's chromium (headless, phone-sized) through Bookworm's pages for PagesTests.

    pages.py open URL [SCREENSHOT]              -> {"heading", "error", "message", "title"}
    pages.py click URL                          -> before and after pressing the form's button
    pages.py reset URL PASSWORD CONFIRM [SHOT]  -> before and after submitting a new password
    pages.py cors PORT API_URL TOKEN            -> {"listed", "other"}: a page served from
        http://127.0.0.1:PORT, then the same page from another port, each fetching API_URL with
        the bearer TOKEN: {"status", "username", "etag"} or {"error"}

Prints one JSON object. Exits 3 with a message when the browser cannot start.
"""
import http.server
import json
import os
import sys
import threading

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as shown
from selenium.webdriver.support.ui import WebDriverWait


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("BOOKWORM_CHROMIUM", "/usr/bin/chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=390,844", "--no-first-run", "--disable-extensions"):
        options.add_argument(flag)
    service = Service(executable_path=os.environ.get("BOOKWORM_CHROMEDRIVER", "/usr/bin/chromedriver"))
    try:
        driver = webdriver.Chrome(service=service, options=options)
        driver.set_page_load_timeout(60)
        return driver
    except WebDriverException as error:
        print(f"the browser did not start: {error.msg}", file=sys.stderr)
        sys.exit(3)


def text(driver, element_id):
    try:
        return driver.find_element(By.ID, element_id).text
    except NoSuchElementException:
        return None


def gone(element):
    """Whether `element`'s document has been replaced. Chromium reports an element of a
    replaced document either as stale or as a node that "does not belong to the document"."""
    try:
        element.is_enabled()
        return False
    except StaleElementReferenceException:
        return True
    except WebDriverException as error:
        if "does not belong to the document" in (error.msg or ""):
            return True
        raise


def read(driver):
    h1 = driver.find_element(By.TAG_NAME, "h1")
    return {"title": driver.title, "heading": h1.text,
            "error": text(driver, "error"), "message": text(driver, "message"), "url": driver.current_url,
            "scripts": len(driver.find_elements(By.TAG_NAME, "script"))}


def state(driver, previous=None):
    """The page once it has loaded: after a submit, once the old page is gone. The page is read
    inside the wait, so a document replaced while it is read (a redirect after the submit) is
    read again rather than failing the run."""
    wait = WebDriverWait(driver, 60, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))
    if previous is not None:
        wait.until(lambda _: gone(previous))
    for attempt in range(20):
        try:
            return wait.until(read)
        except WebDriverException as error:
            if attempt == 19 or "does not belong to the document" not in (error.msg or ""):
                raise


class BlankPage(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<!doctype html><title>web client</title><h1>web client</h1>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve_page(port):
    """A page on its own origin (`http://127.0.0.1:port`; port 0 picks one)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), BlankPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


FETCH = """
const [api, token, done] = arguments;
fetch(api, {headers: {"Authorization": "Bearer " + token}})
  .then(r => r.json().then(body => done({status: r.status, username: body.username, etag: r.headers.get("ETag")})))
  .catch(e => done({error: String(e)}));
"""


def cross_origin(port, api, token):
    listed, other = serve_page(port), serve_page(0)
    driver = browser()
    try:
        driver.set_script_timeout(30)
        result = {}
        for name, server in (("listed", listed), ("other", other)):
            driver.get(f"http://127.0.0.1:{server.server_address[1]}/")
            result[name] = driver.execute_async_script(FETCH, api, token)
        print(json.dumps(result))
    finally:
        driver.quit()
        listed.shutdown()
        other.shutdown()


def main(argv):
    if argv[1] == "cors":
        cross_origin(int(argv[2]), argv[3], argv[4])
        return
    mode, url = argv[1], argv[2]
    driver = browser()
    try:
        driver.get(url)
        result = {"before": state(driver)}
        shot = argv[3] if mode == "open" and len(argv) > 3 else None
        if mode == "click":
            old = driver.find_element(By.TAG_NAME, "h1")
            driver.find_element(By.ID, "submit").click()
            result["after"] = state(driver, old)
        if mode == "reset":
            driver.find_element(By.ID, "password").send_keys(argv[3])
            driver.find_element(By.ID, "confirm").send_keys(argv[4])
            old = driver.find_element(By.TAG_NAME, "h1")
            driver.find_element(By.ID, "submit").click()
            result["after"] = state(driver, old)
            shot = argv[5] if len(argv) > 5 else None
        if shot:
            driver.save_screenshot(shot)
        print(json.dumps(result))
    finally:
        driver.quit()


if __name__ == "__main__":
    main(sys.argv)
