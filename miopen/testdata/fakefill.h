// What the fake cuDNN's convolutions write: every element of an output the
// same value, in the output's cudnnDataType_t, so that package miopen's
// check of the graph API's plans against a legacy algorithm sees agreement
// or not.
#include <stdint.h>
#include <string.h>

// fake_fill_range writes v into elements from to to-1 of p.
static void fake_fill_range(void* p, int type, size_t from, size_t to, double v) {
	float f = (float)v;
	uint32_t bits;
	memcpy(&bits, &f, 4);
	for (size_t i = from; p != NULL && i < to; i++) {
		switch (type) {
		case 0: memcpy((char*)p + 4 * i, &f, 4); break; // float
		case 1: memcpy((char*)p + 8 * i, &v, 8); break; // double
		case 2: { // half, for the small integers the fakes write
			uint16_t h = (uint16_t)((bits >> 16 & 0x8000) | (((bits >> 23 & 0xff) - 112) << 10) | (bits >> 13 & 0x3ff));
			memcpy((char*)p + 2 * i, &h, 2);
			break;
		}
		case 9: { // bfloat16
			uint16_t b = (uint16_t)(bits >> 16);
			memcpy((char*)p + 2 * i, &b, 2);
			break;
		}
		}
	}
}

// fake_fill writes v into the first n elements of p.
static void fake_fill(void* p, int type, size_t n, double v) { fake_fill_range(p, type, 0, n, v); }
