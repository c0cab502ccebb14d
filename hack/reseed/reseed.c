// agentplane-reseed.node: a Node-API addon of one function, reseed(), that reseeds OpenSSL's
// primary random generator from the kernel (RAND_poll). The local runtime's gateways born
// from a template (one CRIU image restored into many sandboxes) call it once per process as
// they are thawed: each copy then draws its own stream. OpenSSL reseeds its per-thread
// generators from the primary when it sees the primary reseeded, and would reseed on its own
// only when the process id changes, which CRIU restores unchanged.
//
// No headers from Node are needed (nor downloadable here): the few Node-API and OpenSSL
// functions it calls are declared below with their C ABI, and the node binary exports them.
#include <stddef.h>

typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef struct napi_callback_info__ *napi_callback_info;
typedef int napi_status;
typedef napi_value (*napi_callback)(napi_env, napi_callback_info);

extern napi_status napi_create_function(napi_env, const char *, size_t, napi_callback, void *, napi_value *);
extern napi_status napi_set_named_property(napi_env, napi_value, const char *, napi_value);
extern napi_status napi_get_boolean(napi_env, int, napi_value *);
extern int RAND_poll(void);

#define NAPI_AUTO_LENGTH ((size_t)-1)

static napi_value reseed(napi_env env, napi_callback_info info) {
	(void)info;
	napi_value ok;
	if (napi_get_boolean(env, RAND_poll() == 1, &ok) != 0)
		return NULL;
	return ok;
}

napi_value napi_register_module_v1(napi_env env, napi_value exports) {
	napi_value fn;
	if (napi_create_function(env, "reseed", NAPI_AUTO_LENGTH, reseed, NULL, &fn) == 0)
		napi_set_named_property(env, exports, "reseed", fn);
	return exports;
}
