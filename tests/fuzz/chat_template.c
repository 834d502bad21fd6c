/* Fuzzes chat templates: the input is a flags byte, then fields separated
   by NUL bytes: a template's text (or a format's name), the BOS and EOS
   texts, then role and content of each message. Renders the conversation
   and checks the API's promises: the counting call agrees with the
   writing one, a short buffer gets a prefix of the text, and rendering
   from message k on continues rendering up to k exactly. */
#include "fuzz_common.h"
#include "tests/status_calls.h"

#define MAX_MESSAGES 16

/* The rendering of msgs[from..n) (malloc'd), its length in *len. */
static char *render(const infer_chat_template *t, const infer_chat_message *msgs, int n, int from, int prompt,
                    int *len) {
    char *out;
    int again;
    *len = sc_chat_format(t, msgs, n, from, prompt, NULL, 0);
    FUZZ_CHECK(*len >= 0, "formatting %d messages from %d failed", n, from);
    out = (char *)malloc((size_t)*len + 1);
    again = sc_chat_format(t, msgs, n, from, prompt, out, (size_t)*len + 1);
    FUZZ_CHECK(again == *len, "the counting call said %d bytes, the writing one %d", *len, again);
    FUZZ_CHECK(out[*len] == 0 && strlen(out) <= (size_t)*len, "not NUL-terminated");
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *fields[3 + 2 * MAX_MESSAGES];
    infer_chat_message msgs[MAX_MESSAGES];
    infer_chat_template t;
    char *text, *p, *end, *whole, shortbuf[16], eot[256];
    int n_fields = 0, n, k, prompt, whole_len;
    if (size < 1) return 0;
    prompt = data[0] & 1;
    text = fuzz_cstr(data + 1, size - 1);
    /* NUL-separated fields (the copy's own NUL ends the last) */
    for (p = text, end = text + (size - 1); n_fields < (int)(sizeof fields / sizeof fields[0]);) {
        fields[n_fields++] = p;
        p += strlen(p) + 1;
        if (p > end) break;
    }
    t = infer_chat_template_from_text(fields[0], n_fields > 1 ? fields[1] : NULL, n_fields > 2 ? fields[2] : NULL);
    (void)infer_chat_template_name(t.kind);
    t.no_think = data[0] >> 1 & 1;
    if (data[0] & 4) snprintf(t.date, sizeof t.date, "23 Nov 2026"); /* else the clock's or the template's */
    n = n_fields > 3 ? (n_fields - 3) / 2 : 0;
    for (k = 0; k < n; k++) {
        msgs[k].role = fields[3 + 2 * k];
        msgs[k].content = fields[4 + 2 * k];
    }
    whole = render(&t, msgs, n, 0, prompt, &whole_len);
    /* a short buffer gets the start of the text */
    FUZZ_CHECK(sc_chat_format(&t, msgs, n, 0, prompt, shortbuf, sizeof shortbuf) == whole_len, "length changed");
    FUZZ_CHECK(strncmp(shortbuf, whole, sizeof shortbuf - 1) == 0, "a short buffer got other text");
    /* format(msgs, n, 0, a) == format(msgs, k, 0, 0) + format(msgs, n, k, a) */
    for (k = 0; k <= n; k++) {
        int head_len, tail_len;
        char *head = render(&t, msgs, k, 0, 0, &head_len), *tail = render(&t, msgs, n, k, prompt, &tail_len);
        FUZZ_CHECK(head_len + tail_len == whole_len && !memcmp(head, whole, (size_t)head_len) &&
                       !memcmp(tail, whole + head_len, (size_t)tail_len),
                   "%s: messages up to %d (%d bytes) and from %d on (%d bytes) are not the whole (%d bytes)",
                   infer_chat_template_name(t.kind), k, head_len, k, tail_len, whole_len);
        free(head);
        free(tail);
    }
    infer_chat_end_of_turn(&t, eot, sizeof eot, NULL, NULL);
    free(whole);
    free(text);
    return 0;
}
