// Per-frame and per-object constants shared by every shader of the example.
#pragma once

cbuffer PerFrame : register(b0)
{
    float4x4 _ViewProjection;
    float3 _CameraPosition;
    float _Time;
    float3 _MainLightDirection;
    float _FogDensity;
    float4 _FogColor;
};

cbuffer PerObject : register(b1)
{
    float4x4 _ObjectToWorld;
    float4 _BaseColor;
    float4 _EmissionColor;
    float _Cutoff;
};

float3 TransformObjectToWorld(float3 position)
{
    return mul(_ObjectToWorld, float4(position, 1.0)).xyz;
}

float4 TransformWorldToClip(float3 position)
{
    return mul(_ViewProjection, float4(position, 1.0));
}
