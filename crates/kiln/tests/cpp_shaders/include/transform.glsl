#ifndef TRANSFORM_GLSL
#define TRANSFORM_GLSL
layout(set = 0, binding = 0) uniform Camera { mat4 u_view_proj; mat4 u_model; };
#define TRANSFORM(m, p) (u_view_proj * (m) * (p))
#endif
