/*
 * hello-c: a Swiftplex plugin in plain C against swiftplex_plugin.h.
 *
 * It greets each new contact (`contactConnected`) with the configured `greeting` and counts the
 * greetings in the host's storage. Only C types and JSON text cross the ABI; to stay
 * dependency-free this example reads the few JSON fields it needs with a small scanner — a real
 * plugin would use a JSON library such as cJSON or yyjson.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swiftplex_plugin.h"

typedef struct {
    const swiftplex_host_api *host;
    char *greeting;
} hello_instance;

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *out = malloc(n);
    if (out) memcpy(out, s, n);
    return out;
}

static const char *skip_space(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* Points just past `"key":` (the first occurrence at or after `from`), or NULL. */
static const char *find_key(const char *from, const char *key) {
    size_t n = strlen(key);
    for (const char *p = strchr(from, '"'); p; p = strchr(p + 1, '"')) {
        if (strncmp(p + 1, key, n) == 0 && p[n + 1] == '"') {
            const char *q = skip_space(p + n + 2);
            if (*q == ':') return skip_space(q + 1);
        }
    }
    return NULL;
}

/* Reads a JSON string value (simple escapes only) into a new buffer; NULL if not a string. */
static char *read_string(const char *p) {
    if (!p || *p != '"') return NULL;
    char *out = malloc(strlen(p) + 1), *o = out;
    if (!out) return NULL;
    for (p++; *p && *p != '"'; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            *o++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
    return out;
}

/* Appends `s` to `out` as a JSON string literal. */
static void append_json_string(char *out, const char *s) {
    char *o = out + strlen(out);
    *o++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; }
        else if (c == '\n') { *o++ = '\\'; *o++ = 'n'; }
        else if (c < 0x20) { o += sprintf(o, "\\u%04x", c); }
        else *o++ = (char)c;
    }
    *o++ = '"';
    *o = 0;
}

static swiftplex_plugin_instance *hello_start(const swiftplex_host_api *host, const char *config_json, char **error) {
    /* Only ABI 1.0's callbacks are used, so any host table at least that large will do. */
    if (!host || host->abi_version != SWIFTPLEX_PLUGIN_ABI_VERSION || host->struct_size < SWIFTPLEX_HOST_API_SIZE_1_0) {
        if (error) *error = copy_string("hello-c: incompatible host callback table");
        return NULL;
    }
    const char *value = config_json ? find_key(config_json, "greeting") : NULL;
    char *greeting = value ? read_string(value) : copy_string("Hello from a C plugin!");
    if (!greeting) {
        if (error) *error = copy_string("config.greeting: expected a string");
        return NULL;
    }
    hello_instance *self = calloc(1, sizeof *self);
    if (!self) { free(greeting); return NULL; }
    self->host = host;
    self->greeting = greeting;
    host->log(host->context, SWIFTPLEX_LOG_INFO, "hello-c started");
    return self;
}

static int32_t hello_handle_event(swiftplex_plugin_instance *instance, const char *event_json, char **error) {
    hello_instance *self = instance;
    const swiftplex_host_api *host = self->host;
    const char *type = find_key(event_json, "type");
    if (!strstr(event_json, "\"contactConnected\"") || !type) return SWIFTPLEX_OK;

    const char *contact = find_key(event_json, "contact");
    const char *id_value = contact ? find_key(contact, "contactId") : NULL;
    if (!id_value) {
        if (error) *error = copy_string("contactConnected without contact.contactId");
        return SWIFTPLEX_ERROR;
    }
    long long contact_id = strtoll(id_value, NULL, 10);

    size_t size = strlen(self->greeting) * 6 + 128;
    char *command = malloc(size);
    if (!command) return SWIFTPLEX_ERROR;
    snprintf(command, size, "/_send @%lld json [{\"msgContent\":{\"type\":\"text\",\"text\":", contact_id);
    append_json_string(command, self->greeting);
    strcat(command, "},\"mentions\":{}}]");
    char *response = host->command(host->context, command);
    free(command);
    int ok = response && strstr(response, "\"newChatItems\"") != NULL;
    host->free_string(response);
    if (!ok) {
        if (error) *error = copy_string("/_send: the Chat API refused the greeting");
        return SWIFTPLEX_ERROR;
    }

    char *stored = host->storage_get(host->context, "greeted");
    long long greeted = stored ? strtoll(stored, NULL, 10) : 0;
    host->free_string(stored);
    char count[32];
    snprintf(count, sizeof count, "%lld", greeted + 1);
    host->storage_set(host->context, "greeted", count);

    char line[64];
    snprintf(line, sizeof line, "greeted contact %lld", contact_id);
    host->log(host->context, SWIFTPLEX_LOG_INFO, line);
    return SWIFTPLEX_OK;
}

static void hello_stop(swiftplex_plugin_instance *instance) {
    hello_instance *self = instance;
    if (!self) return;
    free(self->greeting);
    free(self);
}

static void hello_free_string(char *s) { free(s); }

static const swiftplex_plugin_descriptor descriptor = {
    .abi_version = SWIFTPLEX_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(swiftplex_plugin_descriptor),
    .name = "hello-c",
    .version = "1.0.0",
    .description = "Greets each new contact (a plugin written in C)",
    .events = "[\"contactConnected\"]",
    .config_schema = "{\"type\":\"object\",\"properties\":{\"greeting\":{\"type\":\"string\",\"description\":\"Sent to each new contact\"}},\"additionalProperties\":false}",
    .start = hello_start,
    .handle_event = hello_handle_event,
    .stop = hello_stop,
    .free_string = hello_free_string,
};

const swiftplex_plugin_descriptor *swiftplex_plugin_entry(void) { return &descriptor; }
