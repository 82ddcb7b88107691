// expect: error
#version 450
#define LOG(fmt, ...) fmt
void main() {}
