// Distance fog, chosen by the FOG_LINEAR / FOG_EXP2 keywords.
#pragma once

#if defined(FOG_LINEAR) || defined(FOG_EXP2)
#define USING_FOG 1
#endif

float FogFactor(float distance)
{
#if defined(FOG_LINEAR)
    return saturate(1.0 - distance * _FogDensity);
#elif defined(FOG_EXP2)
    float d = distance * _FogDensity;
    return exp2(-d * d);
#else
    return 1.0;
#endif
}

float3 ApplyFog(float3 color, float factor)
{
    return lerp(_FogColor.rgb, color, factor);
}
