#include <pthread.h>
#include <stdio.h>
static volatile double sink;
__attribute__((noinline)) static double leaf_mul(double x) { for (int i = 0; i < 2000; i++) x = x * 1.0000001 + 0.5; return x; }
__attribute__((noinline)) static double leaf_div(double x) { for (int i = 0; i < 2000; i++) x = x / 1.0000001 + 0.25; return x; }
__attribute__((noinline)) static void compute(long n) { double x = 1; for (long i = 0; i < n; i++) x = (i & 1) ? leaf_mul(x) : leaf_div(x); sink = x; }
__attribute__((noinline)) static void *worker(void *arg) { compute((long)arg); return NULL; }
int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)20000L);
    compute(10000);
    pthread_join(t, NULL);
    printf("%f\n", sink);
    return 0;
}
