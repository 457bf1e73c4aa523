/*
 * The host's test plugin, in C against swiftplex_plugin.h: it proves the ABI works from plain C
 * and gives the tests and the dispatch benchmark a plugin whose behaviour they control.
 *
 * Config: {"tag": "a", "fail_start": false, "count_only": false, "verb": "/seen"}
 * Events: an event whose JSON contains "crash-now" aborts the process; "hang-now" sleeps for
 * an hour; "slow-<tag>" sleeps 300 ms; any other event is reported back to the host as the
 * command "/seen <tag> <event json>" (unless count_only; "verb" replaces "/seen", e.g. "/_send"
 * to test the idempotency keys the host gives sends; "verb": "send_message" sends the event
 * itself as the content of a message to "@1" through the host's send_message, ABI 1.2, or
 * logs that the host has none). A "swiftplex.timer" event is
 * reported the same way. The plugin also stores the number of events in its storage ("count").
 */
#include "swiftplex_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const swiftplex_host_api *host;
    char tag[64];
    char verb[32];
    int count_only;
    unsigned long count;
} test_instance;

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

static void config_string(const char *json, const char *key, char *out, size_t size) {
    char pattern[80];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *p = strstr(json, pattern);
    out[0] = 0;
    if (!p) return;
    p += strlen(pattern);
    size_t i = 0;
    while (*p && *p != '"' && i + 1 < size) out[i++] = *p++;
    out[i] = 0;
}

static int config_true(const char *json, const char *key) {
    char pattern[80];
    snprintf(pattern, sizeof pattern, "\"%s\":true", key);
    return strstr(json, pattern) != NULL;
}

static swiftplex_plugin_instance *start(const swiftplex_host_api *host, const char *config, char **error) {
    if (host->abi_version != SWIFTPLEX_PLUGIN_ABI_VERSION) {
        *error = dup_string("host ABI version differs");
        return NULL;
    }
    if (config_true(config, "fail_start")) {
        *error = dup_string("configured to fail at start");
        return NULL;
    }
    test_instance *t = calloc(1, sizeof *t);
    t->host = host;
    config_string(config, "tag", t->tag, sizeof t->tag);
    t->count_only = config_true(config, "count_only");
    config_string(config, "verb", t->verb, sizeof t->verb);
    if (!t->verb[0]) strcpy(t->verb, "/seen");
    char timer_name[80];
    config_string(config, "timer", timer_name, sizeof timer_name);
    if (timer_name[0]) host->timer_start(host->context, timer_name, 50, 0);
    char menu[200];
    snprintf(menu, sizeof menu, "[{\"keyword\":\"%s\",\"label\":\"test command %s\"}]", t->tag[0] ? t->tag : "test", t->tag);
    host->set_commands(host->context, menu);
    host->log(host->context, SWIFTPLEX_LOG_INFO, "test plugin started");
    return t;
}

static int32_t handle_event(swiftplex_plugin_instance *instance, const char *event, char **error) {
    test_instance *t = instance;
    t->count++;
    if (t->count_only) return SWIFTPLEX_OK;
    if (strstr(event, "crash-now")) abort();
    if (strstr(event, "hang-now")) sleep(3600);
    char slow[80];
    snprintf(slow, sizeof slow, "slow-%s", t->tag);
    if (strstr(event, slow)) usleep(300 * 1000);
    if (strstr(event, "fail-now")) {
        *error = dup_string("failing as asked");
        return SWIFTPLEX_ERROR;
    }
    char count[32];
    snprintf(count, sizeof count, "%lu", t->count);
    t->host->storage_set(t->host->context, "count", count);
    if (strcmp(t->verb, "send_message") == 0) {
        if (t->host->struct_size <= SWIFTPLEX_HOST_API_SIZE_1_1 || !t->host->send_message) {
            t->host->log(t->host->context, SWIFTPLEX_LOG_ERROR, "the host has no send_message");
            return SWIFTPLEX_OK;
        }
        char *response = t->host->send_message(t->host->context, "@1", event, 0);
        if (response) t->host->free_string(response);
        return SWIFTPLEX_OK;
    }
    size_t n = strlen(event) + strlen(t->tag) + strlen(t->verb) + 16;
    char *command = malloc(n);
    snprintf(command, n, "%s %s %s", t->verb, t->tag, event);
    char *response = t->host->command(t->host->context, command);
    free(command);
    if (response) t->host->free_string(response);
    return SWIFTPLEX_OK;
}

static void stop(swiftplex_plugin_instance *instance) {
    free(instance);
}

static void free_string(char *s) { free(s); }

static const swiftplex_plugin_descriptor descriptor = {
    .abi_version = SWIFTPLEX_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(swiftplex_plugin_descriptor),
    .name = "test-plugin",
    .version = "1.0.0",
    .description = "the host's test plugin",
    .events = "[\"*\"]",
    .config_schema = "{\"type\":\"object\",\"properties\":{\"tag\":{\"type\":\"string\"},\"fail_start\":{\"type\":\"boolean\"},"
                     "\"count_only\":{\"type\":\"boolean\"},\"timer\":{\"type\":\"string\"}},\"additionalProperties\":false}",
    .start = start,
    .handle_event = handle_event,
    .stop = stop,
    .free_string = free_string,
};

const swiftplex_plugin_descriptor *swiftplex_plugin_entry(void) { return &descriptor; }
