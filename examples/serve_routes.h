/* serve_routes.h - infer serve's endpoints and their handlers, and the connections they come on. */
#ifndef SERVE_ROUTES_H
#define SERVE_ROUTES_H
#include <microhttpd.h>

#include "serve_server.h"

#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif

void serve_on_completed(void *cls, struct MHD_Connection *con, void **con_cls, enum MHD_RequestTerminationCode toe);
void serve_on_connection(void *cls, struct MHD_Connection *con, void **socket_context,
                         enum MHD_ConnectionNotificationCode code);
mhd_result serve_on_request(void *cls, struct MHD_Connection *con, const char *url, const char *method,
                            const char *version, const char *upload_data, size_t *upload_size, void **con_cls);
void *serve_watchdog_main(void *arg);
int serve_jobs_cancel(server *s);

#endif
