/*
 * swiftplex_plugin.h — the Swiftplex plugin ABI, version 1 (revision 1.1: post_to_channel;
 * revision 1.2: send_message).
 *
 * A plugin is a shared object that exports one C function, `swiftplex_plugin_entry`, returning
 * a descriptor: what the plugin is (ABI version, struct size, name, version, the events it
 * wants, the JSON Schema of its configuration) and its vtable (start, handle_event, stop).
 * The host gives the plugin a table of callbacks: run a Chat API command, log, per-plugin
 * key-value storage, timers, the bot command menu, and (1.1) posting to a channel.
 *
 * Versioning: abi_version changes only for incompatible changes. Within a version the tables
 * only grow, by fields appended at their end; struct_size says which fields a table has, so a
 * plugin checks struct_size before it uses a field added after 1.0, and a host accepts any
 * table at least as large as the 1.0 one.
 *
 * Only C types and JSON text cross this boundary, so a plugin built out of tree — in Swift with
 * SwiftplexPluginKit, or in C, Rust, Zig — loads as long as its ABI version matches.
 *
 * Memory: each side frees what it allocated. Strings the host returns (command responses,
 * storage values) are freed with `host->free_string`; strings the plugin returns (error
 * messages) are freed by the host with `descriptor->free_string`. Strings passed as arguments
 * are borrowed for the duration of the call only.
 *
 * Threads: the host calls start, handle_event and stop of one plugin instance from one thread
 * at a time, in order (each instance has its own queue, so a slow plugin delays only itself).
 * Host callbacks may be called from any thread, also from inside handle_event; they block until
 * done (`command` waits for the Chat API's response).
 *
 * Strings are NUL-terminated UTF-8. JSON is RFC 8259 text.
 */
#ifndef SWIFTPLEX_PLUGIN_H
#define SWIFTPLEX_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. A host loads only plugins of the same version. */
#define SWIFTPLEX_PLUGIN_ABI_VERSION 1u

/* The name of the symbol every plugin exports (type: swiftplex_plugin_entry_fn). */
#define SWIFTPLEX_PLUGIN_ENTRY_SYMBOL "swiftplex_plugin_entry"

/* Log levels for swiftplex_host_api.log. */
enum {
    SWIFTPLEX_LOG_TRACE = 0,
    SWIFTPLEX_LOG_DEBUG = 1,
    SWIFTPLEX_LOG_INFO = 2,
    SWIFTPLEX_LOG_NOTICE = 3,
    SWIFTPLEX_LOG_WARNING = 4,
    SWIFTPLEX_LOG_ERROR = 5,
    SWIFTPLEX_LOG_CRITICAL = 6
};

/* Return codes of plugin functions and host callbacks. */
enum {
    SWIFTPLEX_OK = 0,
    SWIFTPLEX_ERROR = 1
};

/*
 * Callbacks the host gives a plugin instance in `start`. The table and `context` stay valid
 * until `stop` returns. Pass `context` as the first argument of every callback.
 */
typedef struct swiftplex_host_api {
    uint32_t abi_version;  /* SWIFTPLEX_PLUGIN_ABI_VERSION */
    uint32_t struct_size;  /* sizeof(swiftplex_host_api) as the host was built */
    void *context;

    /*
     * Runs one Chat API command (a SimpleX bot API command string such as
     * "/_send @3 json [...]") as the bot and returns its response JSON object, e.g.
     * {"type":"newChatItems",...} or {"type":"chatCmdError","chatError":{...}}.
     * Never NULL; free it with free_string.
     */
    char *(*command)(void *context, const char *command);

    /* Writes one line to the host's log under the plugin instance's name. */
    void (*log)(void *context, int32_t level, const char *message);

    /*
     * Per-instance key-value storage, kept in the host's database across restarts.
     * storage_get returns the value (free it with free_string) or NULL when the key is absent.
     * storage_set stores `value`, or deletes the key when `value` is NULL; returns SWIFTPLEX_OK.
     */
    char *(*storage_get)(void *context, const char *key);
    int32_t (*storage_set)(void *context, const char *key, const char *value);

    /*
     * Timers. timer_start arranges for the event
     *   {"type":"swiftplex.timer","timerId":<id>,"name":"<name>"}
     * to reach handle_event after `delay_ms`, and then every `repeat_ms` if repeat_ms > 0.
     * Returns the timer's id (> 0), or 0 on failure. timer_cancel returns SWIFTPLEX_OK if the
     * timer existed. Timer events go through the instance's queue like every other event.
     */
    uint64_t (*timer_start)(void *context, const char *name, uint64_t delay_ms, uint64_t repeat_ms);
    int32_t (*timer_cancel)(void *context, uint64_t timer_id);

    /*
     * Publishes this instance's commands for the bot's command menu (the profile's
     * preferences.commands): a JSON array of {"keyword":"help","label":"Show help"} objects.
     * The host merges the menus of all instances. Returns SWIFTPLEX_OK, or SWIFTPLEX_ERROR
     * for malformed JSON.
     */
    int32_t (*set_commands)(void *context, const char *commands_json);

    /* Frees a string returned by command, storage_get, post_to_channel or send_message. */
    void (*free_string)(char *string);

    /*
     * Added in ABI 1.1 (struct_size larger than offsetof(swiftplex_host_api, post_to_channel)
     * tells that the host has it; check before calling — a 1.0 host's table ends above).
     *
     * Posts one message to a channel the bot owns (a group made with `/_public group`), as the
     * channel: `channel_id` is its group id, `content_json` a MsgContent object such as
     * {"type":"text","text":"Hello"}. Returns the response JSON object: {"type":"newChatItems",…},
     * or {"type":"chatCmdError",…} when the group is no channel the bot owns, the content is not
     * a JSON object, or the channel has no active relay. Never NULL; free it with free_string.
     */
    char *(*post_to_channel)(void *context, int64_t channel_id, const char *content_json);

    /*
     * Added in ABI 1.2 (struct_size larger than offsetof(swiftplex_host_api, send_message)
     * tells that the host has it).
     *
     * Sends one message as the bot, without building a command string: `chat_ref` names the
     * chat, "@<contactId>" for a contact or "#<groupId>" for a group; `content_json` is a
     * MsgContent object such as {"type":"text","text":"Hello"}; `quoted_item_id` is the chat
     * item the message replies to, or 0 for none. Returns the response JSON object:
     * {"type":"newChatItems",…}, or {"type":"chatCmdError",…} when the engine refuses it or the
     * chat ref or content is malformed (then nothing is sent). Like a `/_send` through
     * `command`, a message sent while the plugin handles a received message is sent once even
     * when that event is given again after a crash. Never NULL; free it with free_string.
     */
    char *(*send_message)(void *context, const char *chat_ref, const char *content_json, int64_t quoted_item_id);
} swiftplex_host_api;

/* The size of an ABI 1.0 host table (before post_to_channel). */
#define SWIFTPLEX_HOST_API_SIZE_1_0 (offsetof(swiftplex_host_api, post_to_channel))
/* The size of an ABI 1.1 host table (before send_message). */
#define SWIFTPLEX_HOST_API_SIZE_1_1 (offsetof(swiftplex_host_api, send_message))

/* A running plugin instance, owned by the plugin. */
typedef void swiftplex_plugin_instance;

/* What a plugin is and how to run it. Returned by the entry point; must stay valid while loaded. */
typedef struct swiftplex_plugin_descriptor {
    uint32_t abi_version;  /* SWIFTPLEX_PLUGIN_ABI_VERSION */
    uint32_t struct_size;  /* sizeof(swiftplex_plugin_descriptor) */
    const char *name;      /* e.g. "auto-accept" */
    const char *version;   /* e.g. "1.0.0" */
    const char *description;
    /*
     * JSON array of the event types the plugin wants, e.g. ["newChatItems","receivedContactRequest"],
     * or ["*"] for all. Timer events are always delivered.
     */
    const char *events;
    /*
     * JSON Schema (a subset: type, properties, required, additionalProperties, items, enum,
     * minimum, maximum, default, description) of the plugin's `config:`; NULL accepts any object.
     * The host validates each instance's config against it and reports errors with the YAML
     * file's line and column before calling start.
     */
    const char *config_schema;

    /*
     * Starts an instance with its configuration (a JSON object, defaults filled in). Returns the
     * instance, or NULL and sets *error to a message (allocated by the plugin) if it cannot start.
     */
    swiftplex_plugin_instance *(*start)(const swiftplex_host_api *host, const char *config_json, char **error);

    /*
     * Handles one event (a JSON object with a "type", as the Chat API emits it). Returns
     * SWIFTPLEX_OK, or SWIFTPLEX_ERROR and may set *error (allocated by the plugin).
     */
    int32_t (*handle_event)(swiftplex_plugin_instance *instance, const char *event_json, char **error);

    /* Stops the instance and frees it. No callbacks may be made after this returns. */
    void (*stop)(swiftplex_plugin_instance *instance);

    /* Frees a string the plugin allocated (an *error). */
    void (*free_string)(char *string);
} swiftplex_plugin_descriptor;

/* The entry point's type. */
typedef const swiftplex_plugin_descriptor *(*swiftplex_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* SWIFTPLEX_PLUGIN_H */
