// compare: OK
// expect: error unless OK
#version 450
#ifndef OK
#error this variant is not supported
#endif
void main() {}
